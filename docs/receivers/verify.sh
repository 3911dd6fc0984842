#!/bin/sh
# Usage: SVC_WEBHOOK_SECRET=… verify.sh <file with the raw body> "<X-Svc-Signature value>"
# Exits 0 when the signature matches. A check for scripts and debugging: the comparison is not constant-time.
set -eu
expected="sha256=$(openssl dgst -sha256 -hmac "$SVC_WEBHOOK_SECRET" < "$1" | sed 's/^.* //')"
[ "$expected" = "$2" ]
