import base64, hashlib, hmac, time

def verify_svc_signature(secret: str, body: bytes, header: str) -> bool:
    """X-Svc-Signature: "sha256=<hex>" of the raw body, keyed by the secret's UTF-8 bytes."""
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), (header or "").encode())

def webhook_key(secret: str) -> bytes:
    """whsec_<base64> is keyed by its decoded bytes; any other secret by its UTF-8 bytes."""
    if secret.startswith("whsec_") and len(secret) > 6:
        try:
            return base64.b64decode(secret[6:], validate=True)
        except ValueError:
            pass
    return secret.encode()

def verify_standard_webhook(secret: str, body: bytes, headers, tolerance: int = 300) -> bool:
    """webhook-signature over "{id}.{timestamp}.{body}"; headers as Flask's or Django's request.headers."""
    msg_id = headers.get("webhook-id") or ""
    timestamp = headers.get("webhook-timestamp") or ""
    if not msg_id or not (timestamp.isascii() and timestamp.isdigit()) or abs(time.time() - int(timestamp)) > tolerance:
        return False  # a timestamp out of range is a replay
    mac = hmac.new(webhook_key(secret), f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256)
    expected = b"v1," + base64.b64encode(mac.digest())
    # Several space-separated signatures while a rotated-out secret is in its overlap: any may match.
    return any(hmac.compare_digest(expected, s.encode()) for s in (headers.get("webhook-signature") or "").split())
