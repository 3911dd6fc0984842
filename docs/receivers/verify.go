package svcwebhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// VerifySvcSignature checks X-Svc-Signature ("sha256=<hex>") against the raw body.
func VerifySvcSignature(secret string, body []byte, header string) bool {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hmac.Equal([]byte("sha256="+hex.EncodeToString(mac.Sum(nil))), []byte(header))
}

// webhookKey: whsec_<base64> is keyed by its decoded bytes; any other secret by its UTF-8 bytes.
func webhookKey(secret string) []byte {
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok && rest != "" {
		if key, err := base64.StdEncoding.Strict().DecodeString(rest); err == nil {
			return key
		}
	}
	return []byte(secret)
}

// VerifyStandardWebhook checks webhook-signature over "{id}.{timestamp}.{body}" and refuses a
// webhook-timestamp more than 5 minutes from now (a replay).
func VerifyStandardWebhook(secret string, body []byte, h http.Header) bool {
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sent, err := strconv.ParseUint(ts, 10, 63)
	if id == "" || err != nil {
		return false
	}
	if age := time.Now().Unix() - int64(sent); age > 300 || age < -300 {
		return false
	}
	mac := hmac.New(sha256.New, webhookKey(secret))
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	expected := []byte("v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	for _, signature := range strings.Fields(h.Get("webhook-signature")) {
		if hmac.Equal(expected, []byte(signature)) {
			return true
		}
	}
	return false
}
