//! A user's long-term memory: recall, write, forget and list (`hermes.memory.*`, answered by
//! the memory-extractor).

use std::time::Duration;

use hermes_protocol::envelope::Envelope;
use hermes_protocol::request::Request;
use hermes_protocol::subjects;
use hermes_protocol::{
    Memory, MemoryChange, MemoryForgetRequest, MemoryKind, MemoryListRequest, MemoryUpdate,
    MemoryWriteRequest, RecallHit, RecallRequest, UpdateOp,
};

use crate::{ClientError, Hermes};

/// The memories of one user in one namespace.
pub struct MemoryClient {
    hermes: Hermes,
    user: String,
    namespace: String,
    timeout: Duration,
}

impl Hermes {
    /// The memories of `user` in `namespace` (`default` is where extracted memories go).
    pub fn memory(&self, user: &str, namespace: &str) -> Result<MemoryClient, ClientError> {
        subjects::check_id("user", user)?;
        Ok(MemoryClient {
            hermes: self.clone(),
            user: user.to_string(),
            namespace: namespace.to_string(),
            timeout: Duration::from_secs(10),
        })
    }
}

impl MemoryClient {
    /// Wait at most `timeout` for each answer (10 s unless set).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    async fn ask<R: Request>(&self, body: R) -> Result<R::Reply, ClientError> {
        let mut envelope = Envelope::request(body);
        envelope.user = Some(self.user.clone());
        Ok(self.hermes.request(envelope, self.timeout).await?.body)
    }

    /// The user's memories most relevant to `query`, at most `limit`, best first.
    pub async fn recall(&self, query: &str, limit: usize) -> Result<Vec<RecallHit>, ClientError> {
        let body = RecallRequest {
            user: self.user.clone(),
            query: query.to_string(),
            limit,
            namespaces: vec![self.namespace.clone()],
            ..Default::default()
        };
        Ok(self.ask(body).await?.hits)
    }

    /// Remember `content` under `key` (merged like extracted memories: a newer value for the
    /// same key replaces the older); `source` says who wrote it. Returns what changed.
    pub async fn write(
        &self,
        kind: MemoryKind,
        key: &str,
        content: &str,
        source: &str,
    ) -> Result<Vec<MemoryChange>, ClientError> {
        let update = MemoryUpdate {
            op: UpdateOp::Add,
            kind,
            key: key.to_string(),
            content: content.to_string(),
            importance: 0.5,
            expiry_days: None,
            topics: Vec::new(),
        };
        self.write_update(update, source).await
    }

    /// Apply one update as it is (importance, expiry, topics of the caller's choosing).
    pub async fn write_update(
        &self,
        update: MemoryUpdate,
        source: &str,
    ) -> Result<Vec<MemoryChange>, ClientError> {
        let body = MemoryWriteRequest {
            user: self.user.clone(),
            namespace: self.namespace.clone(),
            update,
            source: source.to_string(),
        };
        Ok(self.ask(body).await?.changes)
    }

    /// Forget the memory under `key`. Returns what changed (nothing when there was none).
    pub async fn forget(&self, key: &str) -> Result<Vec<MemoryChange>, ClientError> {
        self.forget_where(Some(key), None).await
    }

    /// Forget the memory with record id `id`.
    pub async fn forget_id(&self, id: &str) -> Result<Vec<MemoryChange>, ClientError> {
        self.forget_where(None, Some(id)).await
    }

    async fn forget_where(
        &self,
        key: Option<&str>,
        id: Option<&str>,
    ) -> Result<Vec<MemoryChange>, ClientError> {
        let body = MemoryForgetRequest {
            user: self.user.clone(),
            namespace: self.namespace.clone(),
            id: id.map(str::to_string),
            key: key.map(str::to_string),
        };
        Ok(self.ask(body).await?.changes)
    }

    /// The user's live memories in this namespace, newest first.
    pub async fn list(&self) -> Result<Vec<Memory>, ClientError> {
        let body = MemoryListRequest {
            user: self.user.clone(),
            namespace: Some(self.namespace.clone()),
            ..Default::default()
        };
        Ok(self.ask(body).await?.records)
    }
}
