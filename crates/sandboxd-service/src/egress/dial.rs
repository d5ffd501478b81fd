//! Resolving a host the policy allowed and connecting to it: the operator's names
//! first, then DNS, from sandboxd and never from the sandbox; only addresses sandboxes
//! may reach are tried, and the connection goes to the address resolved here (the name
//! is not looked up again by anyone).
//!
//! The operator's names are `[egress] hosts`. A sandbox on a remote server connects from
//! there: `Fleet::dialer_of` gives the server's `RemoteDialer`, which `connect` uses
//! instead of a local socket.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use sandboxd_contracts::{ByteStream, RemoteDialer};
use sandboxd_core::egress::{self, Operator, Refusal};
use sandboxd_core::egress_own::OwnAddresses;
use tokio::net::TcpStream;

/// How long resolving a name may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long connecting to one address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The addresses of `name` that sandboxes may reach, in the resolver's order.
pub async fn resolve(
    name: &str,
    port: u16,
    operator: &Operator,
    own: &OwnAddresses,
) -> Result<Vec<IpAddr>, Refusal> {
    let found: Vec<IpAddr> = match operator.host(name) {
        Some(ip) => vec![ip],
        None => {
            let looked_up =
                tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((name, port)))
                    .await
                    .map_err(|_| Refusal::Unresolved)?
                    .map_err(|_| Refusal::Unresolved)?;
            let mut ips: Vec<IpAddr> = Vec::new();
            for address in looked_up {
                if !ips.contains(&address.ip()) {
                    ips.push(address.ip());
                }
            }
            ips
        }
    };
    egress::reachable(&found, &operator.allowed_networks, own)
}

/// A connection to the first of `addresses` that answers on `port`, made from this
/// host, or from the remote server `dialer` reaches (its network, not this one's); why
/// none did.
pub async fn connect(
    addresses: &[IpAddr],
    port: u16,
    dialer: Option<&dyn RemoteDialer>,
) -> Result<(Box<dyn ByteStream>, SocketAddr), String> {
    let mut last = String::from("no address to connect to");
    for ip in addresses {
        let address = SocketAddr::new(*ip, port);
        let attempt = async {
            match dialer {
                Some(dialer) => dialer.dial(address).await.map_err(|e| e.to_string()),
                None => {
                    let stream = TcpStream::connect(address)
                        .await
                        .map_err(|e| e.to_string())?;
                    let _ = stream.set_nodelay(true);
                    Ok(Box::new(stream) as Box<dyn ByteStream>)
                }
            }
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, attempt).await {
            Ok(Ok(stream)) => return Ok((stream, address)),
            Ok(Err(error)) => last = format!("{address}: {error}"),
            Err(_) => last = format!("{address}: no answer in {}s", CONNECT_TIMEOUT.as_secs()),
        }
    }
    Err(last)
}
