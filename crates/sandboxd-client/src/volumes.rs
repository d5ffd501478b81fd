//! The volume procedures, typed: make, list, read and remove volumes.

use sandboxd_core::api::{CreateVolumeRequest, VolumeIdBody, VolumeIdQuery, VolumeView};

use sandboxd_core::api::procedures;

use crate::{Client, Error};

impl Client {
    /// `volume.create`: the volume made.
    pub async fn create_volume(&self, request: &CreateVolumeRequest) -> Result<VolumeView, Error> {
        self.invoke::<procedures::VolumeCreate>(request).await
    }

    /// `volume.all`.
    pub async fn volumes(&self) -> Result<Vec<VolumeView>, Error> {
        self.invoke::<procedures::VolumeAll>(&procedures::NoArguments {})
            .await
    }

    /// `volume.one`.
    pub async fn volume_one(&self, volume_id: &str) -> Result<VolumeView, Error> {
        let query = VolumeIdQuery {
            volume_id: volume_id.to_owned(),
        };
        self.invoke::<procedures::VolumeOne>(&query).await
    }

    /// `volume.remove`.
    pub async fn remove_volume(&self, volume_id: &str) -> Result<bool, Error> {
        let body = VolumeIdBody {
            volume_id: volume_id.to_owned(),
        };
        self.invoke::<procedures::VolumeRemove>(&body).await
    }
}
