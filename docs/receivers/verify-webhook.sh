#!/bin/sh
# Usage: SVC_WEBHOOK_SECRET=… verify-webhook.sh <file with the raw body> "<webhook-id>" "<webhook-timestamp>" "<webhook-signature>"
# Exits 0 when webhook-timestamp is within 5 minutes of now and one of the space-separated v1 signatures (two while
# a rotated-out secret is in its overlap) matches. A check for scripts and debugging: the comparison is not constant-time.
set -euf
case "$3" in '' | *[!0-9]*) exit 1 ;; esac
age=$(($(date +%s) - $3))
[ "${age#-}" -le 300 ] || exit 1
# whsec_<base64> is keyed by its decoded bytes; any other secret by its UTF-8 bytes.
case $SVC_WEBHOOK_SECRET in whsec_?*) base64=${SVC_WEBHOOK_SECRET#whsec_} ;; *) base64= ;; esac
if [ -n "$base64" ] && printf '%s\n' "$base64" | grep -Eq '^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$'; then
  key=$(printf %s "$base64" | openssl base64 -d -A | od -An -v -tx1 | tr -d ' \n')
else
  key=$(printf %s "$SVC_WEBHOOK_SECRET" | od -An -v -tx1 | tr -d ' \n')
fi
expected="v1,$({ printf '%s.%s.' "$2" "$3"; cat "$1"; } | openssl dgst -sha256 -mac HMAC -macopt "hexkey:$key" -binary | openssl base64 -A)"
for signature in $4; do
  [ "$signature" = "$expected" ] && exit 0
done
exit 1
