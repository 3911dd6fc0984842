require "openssl"

# X-Svc-Signature: "sha256=<hex>" of the raw body, keyed by the secret's UTF-8 bytes.
def verify_svc_signature(secret, body, header)
  OpenSSL.secure_compare("sha256=" + OpenSSL::HMAC.hexdigest("SHA256", secret, body), header.to_s)
end

# whsec_<base64> is keyed by its decoded bytes; any other secret by its UTF-8 bytes.
def webhook_key(secret)
  rest = secret.delete_prefix("whsec_")
  return secret if rest == secret || rest.empty?
  rest.unpack1("m0") # strict base64
rescue ArgumentError
  secret
end

# webhook-signature over "{id}.{timestamp}.{body}"; headers as Rails' request.headers.
def verify_standard_webhook(secret, body, headers, tolerance: 300)
  id, ts = headers["webhook-id"].to_s, headers["webhook-timestamp"].to_s
  return false if id.empty? || !ts.match?(/\A\d+\z/) || (Time.now.to_i - ts.to_i).abs > tolerance
  digest = OpenSSL::HMAC.digest("SHA256", webhook_key(secret), "#{id}.#{ts}.".b + body.b)
  expected = "v1," + [digest].pack("m0")
  headers["webhook-signature"].to_s.split(" ").any? { |signature| OpenSSL.secure_compare(expected, signature) }
end
