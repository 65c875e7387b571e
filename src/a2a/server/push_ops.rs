//! The push-notification config methods: `Create`, `Get`, `List` and
//! `DeleteTaskPushNotificationConfig`, for the caller's own tasks. Configs are stored (see
//! [`crate::a2a::push_store`]) and used by [`crate::a2a::push`].

use super::{A2aServer, Caller};
use crate::a2a::ids;
use crate::a2a::wire::{
    A2AError, DeleteTaskPushNotificationConfigRequest, GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    TaskPushNotificationConfig,
};

impl A2aServer {
    pub async fn create_push(
        &self,
        caller: &Caller,
        config: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        self.check_task(caller, &config.task_id).await?;
        self.put_push(caller, config).await
    }

    pub async fn get_push(
        &self,
        caller: &Caller,
        request: GetTaskPushNotificationConfigRequest,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        self.check_task(caller, &request.task_id).await?;
        self.configs(&request.task_id)
            .await?
            .into_iter()
            .find(|c| c.id.as_deref() == Some(request.id.as_str()))
            .ok_or_else(|| {
                A2AError::task_not_found(&format!(
                    "{} (it has no push-notification config `{}`)",
                    request.task_id, request.id
                ))
            })
    }

    pub async fn list_push(
        &self,
        caller: &Caller,
        request: ListTaskPushNotificationConfigsRequest,
    ) -> Result<ListTaskPushNotificationConfigsResponse, A2AError> {
        self.check_task(caller, &request.task_id).await?;
        Ok(ListTaskPushNotificationConfigsResponse {
            configs: self.configs(&request.task_id).await?,
            next_page_token: None,
        })
    }

    pub async fn delete_push(
        &self,
        caller: &Caller,
        request: DeleteTaskPushNotificationConfigRequest,
    ) -> Result<(), A2AError> {
        self.check_task(caller, &request.task_id).await?;
        self.push
            .delete(&request.task_id, &request.id)
            .await
            .map_err(|e| A2AError::internal(e.to_string()))?;
        Ok(())
    }

    /// Store `config` for its task (already checked to be the caller's), with an id.
    pub(crate) async fn put_push(
        &self,
        caller: &Caller,
        mut config: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        let url = reqwest::Url::parse(&config.url).map_err(|e| {
            A2AError::invalid_params(format!(
                "pushNotificationConfig.url `{}` is not a URL: {e}",
                config.url
            ))
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(A2AError::invalid_params(format!(
                "pushNotificationConfig.url `{}` must be an http(s) URL",
                config.url
            )));
        }
        let private_ok = self.config.a2a.push_to_private || self.listen.ip().is_loopback();
        if !private_ok && is_private(&url) {
            return Err(A2AError::invalid_params(format!(
                "pushNotificationConfig.url `{}` points to a loopback, private or link-local \
                 address, which this server does not call; use a public URL (or set [a2a] \
                 push_to_private = true)",
                config.url
            )));
        }
        if config.id.as_deref().is_none_or(str::is_empty) {
            config.id = Some(uuid::Uuid::now_v7().to_string());
        }
        config.tenant = None;
        self.push
            .put(config.clone())
            .await
            .map_err(|e| A2AError::internal(e.to_string()))?;
        self.push
            .mark_open(&caller.agent, &config.task_id)
            .await
            .map_err(|e| A2AError::internal(e.to_string()))?;
        Ok(config)
    }

    async fn configs(&self, task: &str) -> Result<Vec<TaskPushNotificationConfig>, A2AError> {
        self.push
            .list(task)
            .await
            .map_err(|e| A2AError::internal(e.to_string()))
    }

    /// The task exists and is the caller's.
    async fn check_task(&self, caller: &Caller, task_id: &str) -> Result<(), A2AError> {
        let (session, turn) =
            ids::parse_task_id(task_id).ok_or_else(|| A2AError::task_not_found(task_id))?;
        self.turn_task(caller, session, turn).await.map(|_| ())
    }
}

/// Whether `url` names a loopback, private or link-local host (an IP literal or `localhost`;
/// names are not resolved here).
fn is_private(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else {
        return true;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => {
            ip.is_loopback() || ip.is_private() || ip.is_link_local() || ip.is_unspecified()
        }
        Ok(std::net::IpAddr::V6(ip)) => {
            ip.is_loopback()
                || ip.is_unspecified()
                || (ip.segments()[0] & 0xfe00) == 0xfc00
                || (ip.segments()[0] & 0xffc0) == 0xfe80
        }
        Err(_) => host.eq_ignore_ascii_case("localhost") || host.ends_with(".localhost"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_private_and_link_local_webhooks_are_recognised() {
        let private = |u: &str| is_private(&reqwest::Url::parse(u).unwrap());
        assert!(private("http://127.0.0.1:9/hook"));
        assert!(private("http://localhost/hook"));
        assert!(private("http://10.1.2.3/hook"));
        assert!(private("http://192.168.0.5/hook"));
        assert!(private("http://169.254.169.254/latest"));
        assert!(private("http://[::1]/hook"));
        assert!(!private("https://hooks.example.com/a2a"));
        assert!(!private("http://93.184.216.34/hook"));
    }
}
