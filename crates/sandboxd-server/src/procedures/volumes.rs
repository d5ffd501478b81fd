//! `volume.*`: an organization's named storage.

use sandboxd_core::access::SandboxNeed;
use sandboxd_core::api::procedures;
use sandboxd_core::api::*;
use sandboxd_core::model::Principal;
use sandboxd_core::validate;

use super::{Context, Serve};
use crate::error::ApiError;
use crate::time::rfc3339;

impl Serve for procedures::VolumeCreate {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: CreateVolumeRequest,
    ) -> Result<VolumeView, ApiError> {
        let command = validate::create_volume(request)?;
        let volume = cx.service.volumes().create_volume(&caller, command).await?;
        Ok(VolumeView::from_volume(&volume, Vec::new(), rfc3339))
    }
}

impl Serve for procedures::VolumeAll {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        _: procedures::NoArguments,
    ) -> Result<Vec<VolumeView>, ApiError> {
        let volumes = cx.service.volumes().volumes(&caller).await?;
        Ok(volumes
            .into_iter()
            .map(|(volume, users)| VolumeView::from_volume(&volume, users, rfc3339))
            .collect())
    }
}

impl Serve for procedures::VolumeOne {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: VolumeIdQuery,
    ) -> Result<VolumeView, ApiError> {
        let volumes = cx.service.volumes();
        let volume = volumes
            .volume_for(&caller, &request.volume_id, SandboxNeed::Read.permission())
            .await?;
        let users = volumes.volume_users(&caller, &volume).await?;
        Ok(VolumeView::from_volume(&volume, users, rfc3339))
    }
}

impl Serve for procedures::VolumeRemove {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: VolumeIdBody,
    ) -> Result<bool, ApiError> {
        cx.service
            .volumes()
            .remove_volume(&caller, &request.volume_id)
            .await?;
        Ok(true)
    }
}
