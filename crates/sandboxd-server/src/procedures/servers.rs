//! `server.*`: remote servers.

use sandboxd_core::api::procedures;
use sandboxd_core::api::*;
use sandboxd_core::model::Principal;
use sandboxd_core::validate;

use super::{Context, Serve};
use crate::error::ApiError;

impl Serve for procedures::ServerAll {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        _: procedures::NoArguments,
    ) -> Result<Vec<ServerView>, ApiError> {
        Ok(cx.service.servers().list(&caller).await?)
    }
}

impl Serve for procedures::ServerOne {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: ServerIdBody,
    ) -> Result<ServerView, ApiError> {
        Ok(cx
            .service
            .servers()
            .one(&caller, &request.server_id)
            .await?)
    }
}

impl Serve for procedures::ServerCreate {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: CreateServerRequest,
    ) -> Result<ServerView, ApiError> {
        let spec = validate::create_server(request)?;
        Ok(cx.service.servers().create(&caller, spec).await?)
    }
}

impl Serve for procedures::ServerUpdate {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: UpdateServerRequest,
    ) -> Result<ServerView, ApiError> {
        let (server_id, changes) = validate::update_server(request)?;
        Ok(cx
            .service
            .servers()
            .update(&caller, &server_id, changes)
            .await?)
    }
}

impl Serve for procedures::ServerRemove {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: ServerIdBody,
    ) -> Result<bool, ApiError> {
        let server_id = validate::server_id(&request.server_id)?;
        cx.service.servers().remove(&caller, &server_id).await?;
        Ok(true)
    }
}

impl Serve for procedures::ServerTest {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: ServerIdBody,
    ) -> Result<ServerTestResult, ApiError> {
        let server_id = validate::server_id(&request.server_id)?;
        Ok(cx.service.servers().test(&caller, &server_id).await?)
    }
}
