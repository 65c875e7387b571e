//! [`FallbackModel`]: a role's model with a second one behind it (`fallback` in the model's
//! table), tried when the first fails after its own retries.

use std::sync::Arc;

use async_trait::async_trait;

use super::{ChatModel, ChatRequest, ChatResponse, DeltaSender, LlmError};

/// The primary model, and the one that answers when it cannot.
pub struct FallbackModel {
    primary: Arc<dyn ChatModel>,
    fallback: Arc<dyn ChatModel>,
}

impl FallbackModel {
    pub fn new(primary: Arc<dyn ChatModel>, fallback: Arc<dyn ChatModel>) -> Self {
        Self { primary, fallback }
    }
}

#[async_trait]
impl ChatModel for FallbackModel {
    fn id(&self) -> String {
        format!("{} (fallback {})", self.primary.id(), self.fallback.id())
    }

    fn is_local(&self) -> bool {
        self.primary.is_local() && self.fallback.is_local()
    }

    /// The primary's: the context is budgeted for the model that usually answers.
    fn model_name(&self) -> String {
        self.primary.model_name()
    }

    /// The primary's answer, else the fallback's. Deltas the primary streamed before it failed
    /// have already been sent; the fallback streams its own answer after them.
    async fn complete(
        &self,
        request: &ChatRequest,
        deltas: Option<DeltaSender>,
    ) -> Result<ChatResponse, LlmError> {
        match self.primary.complete(request, deltas.clone()).await {
            Ok(reply) => Ok(reply),
            Err(primary) => {
                crate::telemetry::metrics::model_error(primary.kind().code());
                tracing::warn!(
                    primary = %self.primary.id(),
                    fallback = %self.fallback.id(),
                    error = %primary,
                    "model call failed; asking the fallback model"
                );
                self.fallback
                    .complete(request, deltas)
                    .await
                    .map_err(|fallback| LlmError::BothFailed {
                        primary: Box::new(primary),
                        fallback: Box::new(fallback),
                    })
            }
        }
    }
}
