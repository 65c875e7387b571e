//! [`McpPool`]: the mounted MCP servers and one supervisor task per server.
//!
//! A supervisor keeps its server connected: it re-lists tools, resources and prompts when the
//! server sends `list_changed`, notices when the server dies ([`McpClient::closed`]) and
//! reconnects with exponential backoff (250 ms doubling to 30 s). While a server is down,
//! [`McpPool::client`] fails at once with a message saying why and that it is reconnecting.
//! Every change of the catalog bumps [`McpPool::changes`] so the bridge can announce it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::client::RmcpClient;
use super::{McpClient, McpError, McpPrompt, McpResource, McpTool};
use crate::config::McpServerConfig;
use crate::protocol::{McpCatalog, McpServerStatus};

/// First reconnect delay; doubled per failed attempt up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// One configured server and what we know of it.
struct Slot {
    config: McpServerConfig,
    client: Option<Arc<dyn McpClient>>,
    /// `ready`, `failed` (never up yet) or `reconnecting`.
    status: &'static str,
    error: Option<String>,
    tools: Vec<McpTool>,
    resources: Vec<McpResource>,
    prompts: Vec<McpPrompt>,
    connections: u32,
    failed_attempts: u32,
    /// [`Listing::as_of`] of the lists mounted now.
    listed_as_of: u64,
}

/// The mounted servers.
pub struct McpPool {
    slots: RwLock<BTreeMap<String, Slot>>,
    changes: watch::Sender<u64>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    self_exe: PathBuf,
}

/// What a listing of a freshly connected server found.
struct Listing {
    tools: Vec<McpTool>,
    resources: Vec<McpResource>,
    prompts: Vec<McpPrompt>,
    /// The server's `list_changed` count read before listing: a later count means the listing
    /// may be stale.
    as_of: u64,
}

impl McpPool {
    /// Connect every server concurrently (so start-up failures are known when this returns),
    /// then supervise each one in the background. Must run on the I/O runtime.
    pub async fn start(configs: &[McpServerConfig], self_exe: &Path) -> Arc<Self> {
        let pool = Arc::new(Self {
            slots: RwLock::new(BTreeMap::new()),
            changes: watch::channel(0).0,
            tasks: Mutex::new(Vec::new()),
            self_exe: self_exe.to_path_buf(),
        });
        let first = configs.iter().map(|config| {
            let pool = Arc::clone(&pool);
            async move { (config.clone(), pool.connect(config).await) }
        });
        for (config, outcome) in futures::future::join_all(first).await {
            let mut slot = Slot::unconnected(config.clone());
            match outcome {
                Ok((client, listing)) => slot.mount(client, listing),
                Err(error) => {
                    tracing::error!(server = %config.name, %error, "MCP server failed to start; retrying in the background");
                    slot.failed_attempts = 1;
                    slot.error = Some(error);
                }
            }
            pool.write().insert(config.name.clone(), slot);
        }
        let supervisors: Vec<_> = configs
            .iter()
            .map(|config| tokio::spawn(Arc::clone(&pool).supervise(config.name.clone())))
            .collect();
        pool.tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(supervisors);
        pool
    }

    /// Bumped whenever the catalog changes.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Every server's status, in name order.
    pub fn catalog(&self) -> McpCatalog {
        McpCatalog {
            servers: self
                .read()
                .iter()
                .map(|(name, slot)| slot.status(name))
                .collect(),
        }
    }

    /// The live client of `server` and its call timeout, or why there is none.
    pub fn client(&self, server: &str) -> Result<(Arc<dyn McpClient>, Duration), McpError> {
        let slots = self.read();
        let Some(slot) = slots.get(server) else {
            return Err(McpError::NotMounted {
                server: server.to_owned(),
                mounted: slots.keys().cloned().collect::<Vec<_>>().join(", "),
            });
        };
        let timeout = Duration::from_secs(slot.config.timeout_secs.max(1));
        match &slot.client {
            Some(client) => Ok((Arc::clone(client), timeout)),
            None => Err(McpError::Dead {
                server: server.to_owned(),
                reason: format!(
                    "{}: {}; Hermes is reconnecting in the background (attempt {}), so retry later",
                    slot.status,
                    slot.error.as_deref().unwrap_or("no reason known"),
                    slot.failed_attempts
                ),
            }),
        }
    }

    /// Stop supervising and close every session (children are stopped gracefully).
    pub async fn shutdown(&self) {
        for task in self
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            task.abort();
        }
        let clients: Vec<_> = self
            .write()
            .values_mut()
            .filter_map(|slot| slot.client.take())
            .collect();
        futures::future::join_all(clients.iter().map(|client| client.shutdown())).await;
    }

    async fn connect(
        &self,
        config: &McpServerConfig,
    ) -> Result<(Arc<dyn McpClient>, Listing), String> {
        let client = RmcpClient::connect(config, &self.self_exe)
            .await
            .map_err(|error| error.to_string())?;
        let client: Arc<dyn McpClient> = Arc::new(client);
        match list_everything(client.as_ref()).await {
            Ok(listing) => Ok((client, listing)),
            Err(error) => {
                client.shutdown().await;
                Err(error)
            }
        }
    }

    /// Keep `name` connected until the pool shuts down.
    async fn supervise(self: Arc<Self>, name: String) {
        loop {
            let (client, config, attempts) = {
                let slots = self.read();
                let Some(slot) = slots.get(&name) else { return };
                (
                    slot.client.clone(),
                    slot.config.clone(),
                    slot.failed_attempts,
                )
            };
            match client {
                Some(client) => self.watch_live(&name, client).await,
                None => {
                    tokio::time::sleep(backoff(attempts)).await;
                    let outcome = self.connect(&config).await;
                    self.after_attempt(&name, outcome);
                }
            }
        }
    }

    /// Wait until the live client dies (→ `reconnecting`) or has announced a list change since
    /// its lists were read (→ re-list). A change announced before this task got here counts
    /// too: on a busy host the first `list_changed` can arrive before the watch starts.
    async fn watch_live(&self, name: &str, client: Arc<dyn McpClient>) {
        let listed_as_of = match self.read().get(name) {
            Some(slot) => slot.listed_as_of,
            None => return,
        };
        let mut changed = client.list_changed();
        tokio::select! {
            reason = client.closed() => {
                tracing::error!(server = %name, %reason, "MCP server died; reconnecting");
                if let Some(slot) = self.write().get_mut(name) {
                    slot.client = None;
                    slot.status = "reconnecting";
                    slot.error = Some(reason);
                    slot.failed_attempts = 0;
                }
                self.bump();
                client.shutdown().await;
            }
            Ok(()) = async { changed.wait_for(|count| *count != listed_as_of).await.map(drop) } => {
                match list_everything(client.as_ref()).await {
                    Ok(listing) => {
                        if let Some(slot) = self.write().get_mut(name) {
                            slot.listed_as_of = listing.as_of;
                            slot.tools = listing.tools;
                            slot.resources = listing.resources;
                            slot.prompts = listing.prompts;
                        }
                        tracing::info!(server = %name, "MCP server lists refreshed");
                        self.bump();
                    }
                    Err(error) => {
                        tracing::warn!(server = %name, %error, "re-listing after list_changed failed; retrying");
                        tokio::time::sleep(FIRST_BACKOFF).await;
                    }
                }
            }
        }
    }

    fn after_attempt(&self, name: &str, outcome: Result<(Arc<dyn McpClient>, Listing), String>) {
        let mut slots = self.write();
        let Some(slot) = slots.get_mut(name) else {
            return;
        };
        match outcome {
            Ok((client, listing)) => {
                slot.mount(client, listing);
                tracing::info!(server = %name, connections = slot.connections, "MCP server reconnected");
                drop(slots);
                self.bump();
            }
            Err(error) => {
                slot.failed_attempts += 1;
                tracing::warn!(server = %name, attempt = slot.failed_attempts, %error, "MCP server reconnect failed");
                slot.error = Some(error);
            }
        }
    }

    fn bump(&self) {
        self.changes.send_modify(|count| *count += 1);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Slot>> {
        self.slots.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Slot>> {
        self.slots.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Slot {
    /// A server not connected yet (`failed` until its first connection).
    fn unconnected(config: McpServerConfig) -> Self {
        Self {
            config,
            client: None,
            status: "failed",
            error: None,
            tools: Vec::new(),
            resources: Vec::new(),
            prompts: Vec::new(),
            connections: 0,
            failed_attempts: 0,
            listed_as_of: 0,
        }
    }

    fn mount(&mut self, client: Arc<dyn McpClient>, listing: Listing) {
        tracing::info!(server = %self.config.name, tools = listing.tools.len(), resources = listing.resources.len(), prompts = listing.prompts.len(), "MCP server mounted");
        self.client = Some(client);
        self.status = "ready";
        self.error = None;
        self.tools = listing.tools;
        self.resources = listing.resources;
        self.prompts = listing.prompts;
        self.listed_as_of = listing.as_of;
        self.connections += 1;
        self.failed_attempts = 0;
    }

    fn status(&self, name: &str) -> McpServerStatus {
        McpServerStatus {
            name: name.to_owned(),
            status: self.status.to_owned(),
            error: self.error.clone(),
            tools: self.tools.clone(),
            timeout_secs: self.config.timeout_secs,
            resources: self.resources.clone(),
            prompts: self.prompts.clone(),
            transport: if self.config.url.is_some() {
                "http"
            } else {
                "stdio"
            }
            .to_owned(),
            pid: self.client.as_ref().and_then(|client| client.pid()),
            reconnects: self.connections.saturating_sub(1),
            protocol: self.client.as_ref().and_then(|client| client.protocol()),
            extensions: self
                .client
                .as_ref()
                .map(|client| client.extensions())
                .unwrap_or_default(),
        }
    }
}

/// Tools (required), resources and prompts (a failure there is logged and left empty).
async fn list_everything(client: &dyn McpClient) -> Result<Listing, String> {
    let as_of = *client.list_changed().borrow();
    let tools = client
        .list_tools()
        .await
        .map_err(|error| error.to_string())?;
    let resources = client.list_resources().await.unwrap_or_else(|error| {
        tracing::warn!(server = client.server(), %error, "resources/list failed; no resources mounted");
        Vec::new()
    });
    let prompts = client.list_prompts().await.unwrap_or_else(|error| {
        tracing::warn!(server = client.server(), %error, "prompts/list failed; no prompts mounted");
        Vec::new()
    });
    Ok(Listing {
        tools,
        resources,
        prompts,
        as_of,
    })
}

/// Delay before reconnect attempt number `failed_attempts + 1`.
fn backoff(failed_attempts: u32) -> Duration {
    FIRST_BACKOFF
        .saturating_mul(1u32 << failed_attempts.min(16))
        .min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::McpFailure;

    #[test]
    fn backoff_doubles_from_250ms_and_caps_at_30s() {
        assert_eq!(backoff(0), Duration::from_millis(250));
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(3), Duration::from_secs(2));
        assert_eq!(backoff(10), MAX_BACKOFF);
        assert_eq!(backoff(40), MAX_BACKOFF);
    }

    #[tokio::test]
    async fn a_server_that_cannot_start_is_failed_with_its_reason_and_calls_say_so() {
        let config = McpServerConfig {
            name: "ghost".into(),
            command: "/nonexistent/no-such-mcp-server".into(),
            ..Default::default()
        };
        let pool = McpPool::start(&[config], Path::new("/nonexistent/self")).await;
        let catalog = pool.catalog();
        assert_eq!(catalog.servers[0].status, "failed");
        assert!(catalog.servers[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("no-such-mcp-server")));
        let error = pool.client("ghost").err().unwrap();
        assert_eq!(error.failure(), McpFailure::Unavailable);
        let text = error.to_string();
        assert!(
            text.contains("is not running") && text.contains("reconnecting"),
            "{text}"
        );
        let unknown = pool.client("nope").err().unwrap();
        assert_eq!(unknown.failure(), McpFailure::NotMounted);
        assert!(unknown.to_string().contains("mounted: ghost"), "{unknown}");
        pool.shutdown().await;
    }

    /// A server whose tool list the test grows and announces by hand.
    struct GrowingServer {
        tools: Mutex<Vec<McpTool>>,
        changed: watch::Sender<u64>,
    }

    impl GrowingServer {
        fn grow(&self, name: &str) {
            self.tools.lock().unwrap().push(McpTool {
                name: name.into(),
                description: String::new(),
                input_schema: serde_json::json!({"type": "object"}),
                hints: Default::default(),
            });
            self.changed.send_modify(|count| *count += 1);
        }
    }

    #[async_trait::async_trait]
    impl McpClient for GrowingServer {
        fn server(&self) -> &str {
            "grow"
        }
        async fn list_tools(&self) -> Result<Vec<McpTool>, McpError> {
            Ok(self.tools.lock().unwrap().clone())
        }
        async fn call_tool(
            &self,
            _: &str,
            _: serde_json::Value,
            _: Duration,
        ) -> Result<crate::protocol::mcp::McpToolResult, McpError> {
            unreachable!("the test never calls a tool")
        }
        async fn list_resources(&self) -> Result<Vec<McpResource>, McpError> {
            Ok(Vec::new())
        }
        async fn read_resource(
            &self,
            _: &str,
            _: Duration,
        ) -> Result<Vec<crate::protocol::mcp::McpResourceContent>, McpError> {
            unreachable!("the test never reads a resource")
        }
        async fn list_prompts(&self) -> Result<Vec<McpPrompt>, McpError> {
            Ok(Vec::new())
        }
        async fn get_prompt(
            &self,
            _: &str,
            _: serde_json::Value,
            _: Duration,
        ) -> Result<crate::protocol::mcp::McpPromptResult, McpError> {
            unreachable!("the test never gets a prompt")
        }
        async fn closed(&self) -> String {
            std::future::pending().await
        }
        fn list_changed(&self) -> watch::Receiver<u64> {
            self.changed.subscribe()
        }
        async fn shutdown(&self) {}
    }

    #[tokio::test]
    async fn a_list_change_announced_before_the_watch_starts_is_still_relisted() {
        let server = Arc::new(GrowingServer {
            tools: Mutex::new(Vec::new()),
            changed: watch::channel(0).0,
        });
        let pool = Arc::new(McpPool {
            slots: RwLock::new(BTreeMap::new()),
            changes: watch::channel(0).0,
            tasks: Mutex::new(Vec::new()),
            self_exe: PathBuf::from("/nonexistent/self"),
        });
        let client: Arc<dyn McpClient> = server.clone();
        let listing = list_everything(client.as_ref()).await.unwrap();
        let mut slot = Slot::unconnected(McpServerConfig {
            name: "grow".into(),
            ..Default::default()
        });
        slot.mount(Arc::clone(&client), listing);
        pool.write().insert("grow".into(), slot);

        server.grow("extra_1");
        tokio::time::timeout(Duration::from_secs(5), pool.watch_live("grow", client))
            .await
            .expect("the change announced before the watch was never picked up");

        let tools = &pool.catalog().servers[0].tools;
        assert_eq!(tools.len(), 1, "{tools:?}");
        assert_eq!(tools[0].name, "extra_1");
    }
}
