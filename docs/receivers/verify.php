<?php
// X-Svc-Signature: "sha256=<hex>" of the raw body, keyed by the secret's UTF-8 bytes.
function verify_svc_signature(string $secret, string $body, string $header): bool {
    return hash_equals('sha256=' . hash_hmac('sha256', $body, $secret), $header);
}

// whsec_<base64> is keyed by its decoded bytes; any other secret by its UTF-8 bytes.
function webhook_key(string $secret): string {
    if (str_starts_with($secret, 'whsec_') && strlen($secret) > 6) {
        $key = base64_decode(substr($secret, 6), true);
        if ($key !== false) return $key;
    }
    return $secret;
}

// webhook-signature over "{id}.{timestamp}.{body}", e.g. verify_standard_webhook($secret,
// file_get_contents('php://input'), $_SERVER['HTTP_WEBHOOK_ID'] ?? '', $_SERVER['HTTP_WEBHOOK_TIMESTAMP'] ?? '',
// $_SERVER['HTTP_WEBHOOK_SIGNATURE'] ?? '').
function verify_standard_webhook(string $secret, string $body, string $id, string $timestamp, string $signatures, int $tolerance = 300): bool {
    if ($id === '' || !ctype_digit($timestamp) || abs(time() - (int) $timestamp) > $tolerance) return false;
    $expected = 'v1,' . base64_encode(hash_hmac('sha256', "$id.$timestamp.$body", webhook_key($secret), true));
    foreach (explode(' ', $signatures) as $signature) {
        if (hash_equals($expected, $signature)) return true;
    }
    return false;
}
