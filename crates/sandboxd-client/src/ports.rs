//! The port procedures, typed: exposing a sandbox's ports as preview URLs.

use sandboxd_core::api::{
    ExposePortRequest, ExposedPortView, PortRequest, SandboxIdQuery, UnexposedView,
};

use sandboxd_core::api::procedures;

use crate::{Client, Error};

impl Client {
    /// `sandbox.exposePort`: the port's preview URL (with a signed link when private).
    pub async fn expose_port(&self, request: &ExposePortRequest) -> Result<ExposedPortView, Error> {
        self.invoke::<procedures::SandboxExposePort>(request).await
    }

    /// `sandbox.ports`: the exposed ports of a sandbox.
    pub async fn ports(&self, sandbox_id: &str) -> Result<Vec<ExposedPortView>, Error> {
        let query = SandboxIdQuery {
            sandbox_id: sandbox_id.to_owned(),
        };
        self.invoke::<procedures::SandboxPorts>(&query).await
    }

    /// `sandbox.unexposePort`.
    pub async fn unexpose_port(&self, sandbox_id: &str, port: u16) -> Result<UnexposedView, Error> {
        let request = PortRequest {
            sandbox_id: sandbox_id.to_owned(),
            port: i64::from(port),
        };
        self.invoke::<procedures::SandboxUnexposePort>(&request)
            .await
    }
}
