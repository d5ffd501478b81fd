# Sourced by the scripts that drive E2B's SDK through an E2B domain, as a deployment
# with `e2b_domain` is driven: source it before scripts/lib/test-server.sh (it picks
# the TLS proxy's port and gives the server its domain, `e2b.localhost:<port>`), then
# call `e2b_domain_proxy` once the server is up. Sets: domain, tls (the proxy's
# directory), proxy (its pid), and `e2b_domain_env`, the settings an SDK user sets
# (E2B_DOMAIN, E2B_API_KEY once `key` is known) plus what makes the domain reach the
# proxy on loopback (its CA trusted, its names resolved to 127.0.0.1).
tls_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
domain="e2b.localhost:$tls_port"
export SANDBOXD_E2B_DOMAIN=$domain

e2b_domain_proxy() {
  tls=$(mktemp -d)
  python3 tests/python/tls_proxy.py e2b.localhost "$tls_port" "$port" "$tls" &
  proxy=$!
  trap 'kill "$proxy" 2>/dev/null || true; rm -rf "$tls"; cleanup' EXIT
  for _ in $(seq 1 100); do [ -e "$tls/ready" ] && break; sleep 0.1; done
  [ -e "$tls/ready" ] || { echo "the TLS proxy did not start" >&2; exit 1; }
  e2b_domain_env=(E2B_DOMAIN="$domain" E2B_API_KEY="$key" SSL_CERT_FILE="$tls/ca.pem"
    E2B_LOOPBACK_DOMAIN="$domain" PYTHONPATH="$(pwd)/tests/python/e2b_domain_site")
}
