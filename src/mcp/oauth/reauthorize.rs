//! [`Reauthorize`]: someone who can authorise Hermes again while it talks to a server — a
//! person at a terminal, or the conformance probe standing in for one. With it, a login's
//! tokens are widened when the server answers `insufficient_scope` (asking for the union of
//! the scope held and the one challenged) and replaced by a new login when the server has
//! moved to another authorization server. Without it (a deployment with nobody to ask), both
//! end in an error naming the `hermes mcp login` to run.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::token_store::StoredTokens;
use super::OAuthError;

type LoginFn = dyn Fn(String) -> BoxFuture<'static, Result<StoredTokens, OAuthError>> + Send + Sync;

/// A login that can be run again, for the scope it is given.
#[derive(Clone)]
pub struct Reauthorize(Arc<LoginFn>);

impl Reauthorize {
    /// `login(scope)` runs a whole login asking for `scope` and returns its tokens.
    pub fn new<F, Fut>(login: F) -> Self
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<StoredTokens, OAuthError>> + Send + 'static,
    {
        Self(Arc::new(move |scope| Box::pin(login(scope))))
    }

    pub(super) async fn login(&self, scope: String) -> Result<StoredTokens, OAuthError> {
        (self.0)(scope).await
    }
}

impl std::fmt::Debug for Reauthorize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reauthorize(..)")
    }
}
