//! The name a TLS tunnel's first flight asks for: its ClientHello's server name (SNI),
//! read by rustls's parser before a byte goes on, so that a tunnel opened to an allowed
//! host cannot greet another one behind the same front end (a CDN or a load balancer
//! routes by that name, not by the address).

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _};

/// How long a program may take to send its ClientHello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// The most read for it: a ClientHello is at most a few records (post-quantum key
/// shares make it a few kilobytes).
const MAX_HELLO: usize = 64 * 1024;

/// What a tunnel's first flight was.
#[derive(Debug, PartialEq, Eq)]
pub enum Hello {
    /// A ClientHello, and the server name it asks for (none: no SNI, or an address).
    Tls {
        bytes: Vec<u8>,
        name: Option<String>,
    },
    /// Not a ClientHello, too long, too slow, or the program ended first.
    Other,
}

/// Reads the program's first flight, up to its whole ClientHello.
pub async fn read(program: &mut (impl AsyncRead + Unpin)) -> Hello {
    tokio::time::timeout(HELLO_TIMEOUT, read_hello(program))
        .await
        .unwrap_or(Hello::Other)
}

async fn read_hello(program: &mut (impl AsyncRead + Unpin)) -> Hello {
    let mut acceptor = rustls::server::Acceptor::default();
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    while bytes.len() < MAX_HELLO {
        let n = match program.read(&mut chunk).await {
            Ok(0) | Err(_) => return Hello::Other,
            Ok(n) => n,
        };
        bytes.extend_from_slice(&chunk[..n]);
        let mut fresh = &chunk[..n];
        while !fresh.is_empty() {
            if acceptor.read_tls(&mut fresh).is_err() {
                return Hello::Other;
            }
        }
        match acceptor.accept() {
            Ok(Some(accepted)) => {
                let name = accepted.client_hello().server_name().map(str::to_owned);
                return Hello::Tls { bytes, name };
            }
            Ok(None) => {}
            Err(_) => return Hello::Other,
        }
    }
    Hello::Other
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// The first flight a real client sends for `name`.
    fn client_hello(name: &str) -> Vec<u8> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        let server = rustls::pki_types::ServerName::try_from(name.to_owned()).unwrap();
        let mut client = rustls::ClientConnection::new(Arc::new(config), server).unwrap();
        let mut out = Vec::new();
        client.write_tls(&mut out).unwrap();
        out
    }

    #[tokio::test]
    async fn the_name_a_client_hello_asks_for_is_read() {
        let hello = client_hello("allowed.test");
        let read = read(&mut hello.as_slice()).await;
        assert_eq!(
            read,
            Hello::Tls {
                bytes: hello.clone(),
                name: Some("allowed.test".into())
            }
        );
        // An address is no server name.
        let by_address = client_hello("127.0.0.2");
        assert!(matches!(
            read_hello(&mut by_address.as_slice()).await,
            Hello::Tls { name: None, .. }
        ));
    }

    #[tokio::test]
    async fn what_is_not_a_client_hello_is_other() {
        for bytes in [
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            vec![0x16, 0x03, 0x01, 0x00, 0x05, 0x02, 0, 0, 1, 0],
            Vec::new(),
        ] {
            assert_eq!(read(&mut bytes.as_slice()).await, Hello::Other, "{bytes:?}");
        }
        // Cut short: the program ends before its hello does.
        let hello = client_hello("allowed.test");
        let cut = &hello[..hello.len() / 2];
        assert_eq!(read(&mut &cut[..]).await, Hello::Other);
    }
}
