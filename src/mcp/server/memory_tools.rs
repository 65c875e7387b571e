//! Hermes' own memory on its MCP server: the tools `memory_write`, `memory_search` and
//! `memory_forget`, the caller's memories as resources `memory://<user>/<id>`, and the prompt
//! `memory_qa`, each on the memory service of the bus for the caller's own user.

use rmcp::model::{
    GetPromptResult, JsonObject, PromptMessage, ReadResourceResult, ResourceContents, Role, Tool,
};
use rmcp::ErrorData;
use serde_json::{json, Value};

use super::auth::{Denied, Principal};
use super::handler::{HermesMcpServer, Outcome, FORGET, SEARCH, WRITE};
use super::memory::{self, ForgetArgs, MemoryArgsError, ReadFailure, SearchArgs, WriteArgs};
use crate::protocol::{MemoryForgetRequest, MemoryListRequest, RecallRequest};

impl HermesMcpServer {
    pub(super) async fn write(
        &self,
        who: &Principal,
        args: Result<WriteArgs, MemoryArgsError>,
    ) -> Result<Outcome, Denied> {
        let args = match args {
            Ok(args) => args,
            Err(e) => return Ok(Err(e.to_string())),
        };
        let user = args.user.clone().unwrap_or_else(|| who.user.clone());
        let namespace = memory::namespace_or_default(args.namespace.as_deref()).to_owned();
        who.check_data(&user, &namespace)?;
        let source = format!("mcp:{}", who.user);
        let outcome = match memory::write_request(args, &user, &namespace, &source) {
            Ok(request) => self
                .memory()
                .write(request)
                .await
                .map(|reply| json!({"changes": reply.changes}))
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        Ok(outcome)
    }

    pub(super) async fn search(
        &self,
        who: &Principal,
        args: Result<SearchArgs, MemoryArgsError>,
    ) -> Result<Outcome, Denied> {
        let args = match args {
            Ok(args) => args,
            Err(e) => return Ok(Err(e.to_string())),
        };
        let user = args.user.clone().unwrap_or_else(|| who.user.clone());
        // Another user's memories are searched in one (granted) namespace only, never across.
        let namespace = match (&args.namespace, user == who.user) {
            (None, true) => None,
            (namespace, _) => {
                let namespace = memory::namespace_or_default(namespace.as_deref()).to_owned();
                who.check_data(&user, &namespace)?;
                Some(namespace)
            }
        };
        let request = RecallRequest {
            user,
            query: args.query,
            limit: args.limit.unwrap_or(5).clamp(1, 5),
            namespace,
            ..RecallRequest::default()
        };
        let outcome = self.memory().recall(request).await.map(|reply| {
            let hits: Vec<Value> = reply
                .hits
                .iter()
                .map(|hit| memory::hit_json(&hit.record, hit.score))
                .collect();
            json!({ "memories": hits })
        });
        let outcome = outcome.map_err(|e| e.to_string());
        Ok(outcome)
    }

    pub(super) async fn forget(
        &self,
        who: &Principal,
        args: Result<ForgetArgs, MemoryArgsError>,
    ) -> Result<Outcome, Denied> {
        let args = match args {
            Ok(args) => args,
            Err(e) => return Ok(Err(e.to_string())),
        };
        if args.id.is_none() && args.key.is_none() {
            return Ok(Err(
                "give the memory's `id` (from memory_search) or its `key`".into(),
            ));
        }
        let user = args.user.clone().unwrap_or_else(|| who.user.clone());
        let namespace = memory::namespace_or_default(args.namespace.as_deref()).to_owned();
        who.check_data(&user, &namespace)?;
        let request = MemoryForgetRequest {
            user,
            namespace,
            id: args.id,
            key: args.key,
        };
        Ok(self
            .memory()
            .forget(request)
            .await
            .map(|reply| json!({"changes": reply.changes}))
            .map_err(|e| e.to_string()))
    }

    pub(super) fn memory_tools() -> Vec<Tool> {
        vec![
            Tool::new(WRITE, "Remember one thing about a user for later conversations and other agents: a fact, preference, constraint or event, as one sentence. Writing the same `key` again updates it. Returns {changes: [{op, key, content}]}. Writes only your own user's memories unless your role grants the namespace.", rmcp::handler::server::common::schema_for_type::<WriteArgs>()),
            Tool::new(SEARCH, "Search a user's memories by words (Chinese or English); returns up to 5, best first: {memories: [{id, uri, key, content, kind, namespace, score}]}. Use before answering questions about the user's preferences or history.", rmcp::handler::server::common::schema_for_type::<SearchArgs>()),
            Tool::new(FORGET, "Forget one memory, by its `id` (from memory_search) or its `key`. Returns {changes}. Use when the user asks to forget or cancel something.", rmcp::handler::server::common::schema_for_type::<ForgetArgs>()),
        ]
    }

    pub(super) async fn read_memory(
        &self,
        who: &Principal,
        uri: &str,
    ) -> Result<Result<ReadResourceResult, ReadFailure>, Denied> {
        let Some((user, id)) = memory::parse_uri(uri) else {
            return Ok(Err(ReadFailure::NotAMemoryUri(uri.to_owned())));
        };
        if user != who.user {
            // Only a granted namespace opens another user's record: look it up, then check.
            let records = self
                .memory()
                .list(MemoryListRequest {
                    user: user.clone(),
                    namespace: None,
                    id: Some(id.clone()),
                    ..MemoryListRequest::default()
                })
                .await;
            let namespace = match &records {
                Ok(records) => records.first().map(|r| r.namespace.clone()),
                Err(_) => None,
            };
            who.check_data(
                &user,
                namespace
                    .as_deref()
                    .unwrap_or(memory::namespace_or_default(None)),
            )?;
        }
        let records = self
            .memory()
            .list(MemoryListRequest {
                user,
                namespace: None,
                id: Some(id),
                ..MemoryListRequest::default()
            })
            .await;
        Ok(match records {
            Ok(records) => match records.into_iter().next() {
                Some(record) => {
                    let text = serde_json::to_string_pretty(&record).unwrap_or_default();
                    Ok(ReadResourceResult::new(vec![
                        ResourceContents::TextResourceContents {
                            uri: uri.to_owned(),
                            mime_type: Some("application/json".into()),
                            text,
                            meta: None,
                        },
                    ]))
                }
                None => Err(ReadFailure::NotFound(uri.to_owned())),
            },
            Err(e) => Err(e.into()),
        })
    }

    pub(super) async fn qa_prompt(
        &self,
        who: &Principal,
        arguments: Option<JsonObject>,
    ) -> Result<GetPromptResult, ErrorData> {
        let question = arguments
            .as_ref()
            .and_then(|args| args.get("question"))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ErrorData::invalid_params("memory_qa needs the argument `question`", None)
            })?
            .to_owned();
        let recalled = self
            .memory()
            .recall(RecallRequest {
                user: who.user.clone(),
                query: question.clone(),
                limit: 5,
                ..RecallRequest::default()
            })
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let memories: Vec<String> = recalled
            .hits
            .iter()
            .map(|hit| format!("- [{}] {}", hit.record.key, hit.record.content))
            .collect();
        let listed = if memories.is_empty() {
            "(none found)".to_owned()
        } else {
            memories.join("\n")
        };
        let text = format!(
            "Answer the question about user `{}` using only the memories below. If they do not \
             contain the answer, say that you do not know.\n\nMemories:\n{listed}\n\nQuestion: {question}",
            who.user
        );
        Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)]).with_description(
                format!("Memory QA for `{}` ({} memories)", who.user, memories.len()),
            ),
        )
    }
}
