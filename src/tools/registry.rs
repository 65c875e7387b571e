//! The tool registry: the whitelist of tools the engine may execute, each with its schema
//! compiled once at registration. [`ToolRegistry::prepare`] is the only way to a runnable call:
//! an unknown name gets a structured `unknown_tool` error naming what exists (closest first),
//! and arguments go through [`validate_and_repair`].
//!
//! **Injected arguments.** Top-level argument keys starting with `_` (e.g. [`USER_ARG`]) belong
//! to the engine, not the model: they are stripped from the schema the model sees
//! ([`ToolRegistry::specs`]) and from the schema the arguments are validated against, a model
//! that sends one is refused, and the tool-executor adds them after validation with
//! [`ToolRegistry::inject_user`] — only for tools whose own schema declares them.
//!
//! **Definitions.** Each entry keeps the tool's [`ToolDefinition`] with the config overrides
//! (`[[tools.define]]` entries naming it, see [`ToolRegistry::with_overrides`]) applied at
//! registration; the timeout, mode, effect and risk the executor uses come from it.
//!
//! The registry is cheap to clone (one `Arc`) and `Send + Sync`; its lock is a
//! `std::sync::RwLock` held only for map look-ups, never across an `.await`.

use super::suggest::closest_names;
use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use serde_json::Value;

use super::definition::{ToolDefineConfig, ToolDefinition};
use super::validate::{validate_and_repair, Validator, FIX_ARGUMENTS_HINT};
use super::{PreparedCall, Tool, ToolError, ToolErrorCode};
use crate::llm::ToolSpec;
use crate::tools::definition::ApplyConfig;

/// Prefix of argument keys the engine injects after validation.
pub const INJECTED_PREFIX: char = '_';
/// The injected key holding the id of the user on whose behalf the call runs.
pub const USER_ARG: &str = "_user";
/// Injected argument: the user's answers to what an MCP tool's server asked at the call's
/// previous round (`input_required`), for the round that sends them back.
pub const INPUT_ARG: &str = "_input";
/// At most this many similar names are suggested for an unknown tool.
const MAX_SUGGESTIONS: usize = 5;
/// Up to this many tools, an unknown-tool message lists every name.
const LIST_ALL_UP_TO: usize = 15;
/// Longest allowed tool name (the limit OpenAI-compatible APIs enforce).
const MAX_NAME_LEN: usize = 64;

/// The whitelist. Clones share the same tools.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    entries: Arc<RwLock<BTreeMap<String, Entry>>>,
    /// Config entries merged over the definition of the tool they name, at registration.
    overrides: Arc<BTreeMap<String, ToolDefineConfig>>,
}

#[derive(Clone)]
struct Entry {
    tool: Arc<dyn Tool>,
    /// The spec shown to the model: injected (`_`) properties removed.
    spec: ToolSpec,
    /// The definition with overrides applied and injected properties removed (shared with
    /// every call that reads it: it holds a schema).
    definition: Arc<ToolDefinition>,
    /// The injected keys the tool's own schema declares.
    injected: Vec<String>,
    validator: Arc<Validator>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.names())
            .finish()
    }
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry that merges each `[[tools.define]]` entry over the definition of the tool
    /// it names when that tool registers (entries naming no tool are ignored here).
    pub fn with_overrides(defines: &[ToolDefineConfig]) -> Self {
        let overrides = defines
            .iter()
            .map(|d| (d.name.clone(), d.clone()))
            .collect();
        Self {
            entries: Arc::default(),
            overrides: Arc::new(overrides),
        }
    }

    /// Add a tool to the whitelist. Its name must match `^[A-Za-z0-9_-]{1,64}$` and be new,
    /// and its input schema must compile and describe an object.
    pub fn register(&self, tool: Arc<dyn Tool>) -> Result<(), ToolError> {
        let mut definition = tool.definition();
        if let Some(entry) = self.overrides.get(&definition.name) {
            definition.apply(entry);
        }
        let full = definition.spec();
        check_name(&full.name)?;
        let refuse = |problem: String| {
            ToolError::new(
                ToolErrorCode::InvalidArguments,
                format!("cannot register tool `{}`: {problem}", full.name),
            )
            .with_hint("fix the tool definition and register it again")
        };
        check_object_schema(&full.input_schema).map_err(&refuse)?;
        let (input_schema, injected) = strip_injected(&full.input_schema);
        let validator = Validator::new(&input_schema).map_err(|e| refuse(e.to_string()))?;
        let spec = ToolSpec {
            name: full.name.clone(),
            description: full.description.clone(),
            input_schema: input_schema.clone(),
        };
        definition.input_schema = input_schema;
        let entry = Entry {
            tool,
            spec,
            definition: Arc::new(definition),
            injected,
            validator: Arc::new(validator),
        };
        let mut entries = self.write();
        if entries.contains_key(&full.name) {
            return Err(refuse(
                "a tool with this name is already registered; unregister it first or choose another name"
                    .to_string(),
            ));
        }
        entries.insert(full.name, entry);
        Ok(())
    }

    /// Remove a tool; returns whether it was registered.
    pub fn unregister(&self, name: &str) -> bool {
        self.write().remove(name).is_some()
    }

    /// Every registered name, sorted.
    pub fn names(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    /// The specs shown to the model (injected properties removed), sorted by name.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.read().values().map(|e| e.spec.clone()).collect()
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.read().get(name).map(|e| Arc::clone(&e.tool))
    }

    pub fn contains(&self, name: &str) -> bool {
        self.read().contains_key(name)
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// The tool's timeout (its definition's, overrides applied), if it is registered.
    pub fn timeout_of(&self, name: &str) -> Option<Duration> {
        self.read().get(name).map(|e| e.definition.timeout())
    }

    /// The definition of a registered tool (overrides applied, injected properties removed).
    pub fn definition(&self, name: &str) -> Option<Arc<ToolDefinition>> {
        self.read().get(name).map(|e| e.definition.clone())
    }

    /// Every registered tool's definition, sorted by name.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.read()
            .values()
            .map(|e| ToolDefinition::clone(&e.definition))
            .collect()
    }

    /// Whitelist check, then validation with safe repair. The returned arguments never hold
    /// injected (`_`) keys; add them with [`Self::inject_user`].
    pub fn prepare(
        &self,
        name: &str,
        arguments: Value,
    ) -> Result<(Arc<dyn Tool>, PreparedCall), ToolError> {
        // Two statements: the read guard must be gone before `unknown_tool` locks again. Only
        // the tool and its validator are taken (the entry's spec and definition are schemas).
        let found = (self.read().get(name)).map(|e| (e.tool.clone(), e.validator.clone()));
        let (tool, validator) = found.ok_or_else(|| self.unknown_tool(name))?;
        refuse_injected(&arguments)?;
        let prepared = validate_and_repair(&validator, arguments)?;
        refuse_injected(&prepared.arguments)?;
        Ok((tool, prepared))
    }

    /// Add `_user` to a prepared call if the tool's schema declares it; returns whether it did.
    pub fn inject_user(&self, name: &str, call: &mut PreparedCall, user: &str) -> bool {
        self.inject(name, call, USER_ARG, Value::String(user.to_string()))
    }

    /// Add [`INPUT_ARG`] (answers for the tool's MCP server) to a prepared call, if the tool
    /// declares it.
    pub fn inject_input(&self, name: &str, call: &mut PreparedCall, input: Value) -> bool {
        self.inject(name, call, INPUT_ARG, input)
    }

    fn inject(&self, name: &str, call: &mut PreparedCall, key: &str, value: Value) -> bool {
        let wanted = self
            .read()
            .get(name)
            .is_some_and(|e| e.injected.iter().any(|k| k == key));
        match call.arguments.as_object_mut() {
            Some(map) if wanted => {
                map.insert(key.to_string(), value);
                true
            }
            _ => false,
        }
    }

    /// The structured error for a name that is not in the whitelist.
    fn unknown_tool(&self, name: &str) -> ToolError {
        let names = self.names();
        let shown: String = name.chars().take(MAX_NAME_LEN).collect();
        let message = if names.is_empty() {
            format!("no tool named `{shown}`; no tools are available")
        } else if names.len() <= LIST_ALL_UP_TO {
            format!(
                "no tool named `{shown}`; available tools: {}",
                names.join(", ")
            )
        } else {
            format!(
                "no tool named `{shown}`; {} tools are available, the closest names are in details",
                names.len()
            )
        };
        ToolError::new(ToolErrorCode::UnknownTool, message)
            .with_hint("use one of the listed tools")
            .with_details(closest_names(&shown, &names, MAX_SUGGESTIONS))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Entry>> {
        self.entries.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Entry>> {
        self.entries.write().unwrap_or_else(PoisonError::into_inner)
    }
}

fn check_name(name: &str) -> Result<(), ToolError> {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !name.is_empty() && name.len() <= MAX_NAME_LEN && ok_chars {
        return Ok(());
    }
    Err(ToolError::new(
        ToolErrorCode::InvalidArguments,
        format!(
            "cannot register tool `{}`: a tool name must be 1–64 characters of letters, digits, `_` or `-`",
            name.chars().take(80).collect::<String>()
        ),
    )
    .with_hint("rename the tool and register it again"))
}

/// The input schema must be an object schema (models call tools with an arguments object).
fn check_object_schema(schema: &Value) -> Result<(), String> {
    let Some(map) = schema.as_object() else {
        return Err("its input schema must be a JSON object".to_string());
    };
    let describes_object = match map.get("type") {
        None => true,
        Some(Value::String(kind)) => kind == "object",
        Some(Value::Array(kinds)) => kinds.iter().any(|k| k == "object"),
        Some(_) => false,
    };
    if describes_object {
        Ok(())
    } else {
        Err("its input schema must describe an object (`\"type\": \"object\"`)".to_string())
    }
}

/// The schema without top-level injected properties (and their `required` entries), and the
/// injected keys it declared.
pub(crate) fn strip_injected(schema: &Value) -> (Value, Vec<String>) {
    let mut stripped = schema.clone();
    let mut injected = Vec::new();
    if let Some(props) = stripped
        .get_mut("properties")
        .and_then(Value::as_object_mut)
    {
        injected = props
            .keys()
            .filter(|k| k.starts_with(INJECTED_PREFIX))
            .cloned()
            .collect();
        props.retain(|k, _| !k.starts_with(INJECTED_PREFIX));
    }
    if let Some(required) = stripped.get_mut("required").and_then(Value::as_array_mut) {
        required.retain(|k| !k.as_str().is_some_and(|k| k.starts_with(INJECTED_PREFIX)));
    }
    (stripped, injected)
}

/// A model may not send injected keys: they are the engine's (e.g. who the user is).
pub(crate) fn refuse_injected(arguments: &Value) -> Result<(), ToolError> {
    let Some(map) = arguments.as_object() else {
        return Ok(());
    };
    let reserved: Vec<String> = map
        .keys()
        .filter(|k| k.starts_with(INJECTED_PREFIX))
        .map(|k| format!("/{k}: keys starting with `_` are reserved for the engine; remove it"))
        .collect();
    if reserved.is_empty() {
        return Ok(());
    }
    Err(ToolError::new(
        ToolErrorCode::InvalidArguments,
        "the arguments contain keys reserved for the engine",
    )
    .with_hint(FIX_ARGUMENTS_HINT)
    .with_details(reserved))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::builtin::{all_names, builtin, BuiltinData};
    use async_trait::async_trait;
    use serde_json::json;

    struct Fake(ToolSpec);

    #[async_trait]
    impl Tool for Fake {
        fn spec(&self) -> ToolSpec {
            self.0.clone()
        }
        async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
            Ok(arguments)
        }
    }

    fn fake(name: &str, schema: Value) -> Arc<dyn Tool> {
        Arc::new(Fake(ToolSpec {
            name: name.to_string(),
            description: "test tool".to_string(),
            input_schema: schema,
        }))
    }

    fn builtins() -> ToolRegistry {
        let registry = ToolRegistry::new();
        let data = BuiltinData::demo().unwrap();
        for name in all_names() {
            registry.register(builtin(name, &data).unwrap()).unwrap();
        }
        registry
    }

    #[test]
    fn registry_is_send_sync_and_clones_share_tools() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<ToolRegistry>();
        let registry = ToolRegistry::new();
        let clone = registry.clone();
        clone
            .register(fake("echo", json!({"type": "object"})))
            .unwrap();
        assert!(registry.contains("echo"));
        assert!(registry.unregister("echo"));
        assert!(!clone.contains("echo"));
        assert!(!registry.unregister("echo"));
    }

    #[test]
    fn registry_rejects_a_bad_name() {
        let registry = ToolRegistry::new();
        let too_long = "x".repeat(65);
        for name in ["", "has space", "dot.ted", "ünicode", too_long.as_str()] {
            let err = registry.register(fake(name, json!({}))).unwrap_err();
            assert!(err.message.contains("1–64 characters"), "{name}: {err:?}");
        }
        registry.register(fake(&"x".repeat(64), json!({}))).unwrap();
        registry.register(fake("srv__tool-1", json!({}))).unwrap();
    }

    #[test]
    fn registry_rejects_an_invalid_schema() {
        let registry = ToolRegistry::new();
        let err = registry
            .register(fake(
                "broken",
                json!({"type": "object", "properties": {"a": {"type": "objekt"}}}),
            ))
            .unwrap_err();
        assert!(err.message.contains("does not compile"), "{err:?}");
        let err = registry
            .register(fake("scalar", json!({"type": "string"})))
            .unwrap_err();
        assert!(err.message.contains("describe an object"), "{err:?}");
        assert!(registry.register(fake("bool_schema", json!(true))).is_err());
        assert!(registry.is_empty());
    }

    #[test]
    fn registry_rejects_a_duplicate_name() {
        let registry = builtins();
        let err = registry.register(fake("add", json!({}))).unwrap_err();
        assert!(err.message.contains("already registered"), "{err:?}");
    }

    #[test]
    fn unknown_tool_error_lists_closest_names() {
        let registry = builtins();
        let Err(err) = registry.prepare("order_lookpu", json!({})) else {
            panic!("an unknown tool must not prepare");
        };
        assert_eq!(err.code, ToolErrorCode::UnknownTool);
        assert_eq!(
            err.message,
            "no tool named `order_lookpu`; available tools: add, current_time, generate_report, order_lookup, track_parcel"
        );
        assert_eq!(err.hint.as_deref(), Some("use one of the listed tools"));
        assert_eq!(err.details[0], "order_lookup");
        assert_eq!(err.details.len(), 5);
    }

    #[test]
    fn unknown_tool_among_many_suggests_five_without_listing_all() {
        let registry = ToolRegistry::new();
        for i in 0..20 {
            registry
                .register(fake(&format!("tool_{i:02}"), json!({})))
                .unwrap();
        }
        let Err(err) = registry.prepare("tool_7", json!({})) else {
            panic!("an unknown tool must not prepare");
        };
        assert!(
            err.message.contains("20 tools are available"),
            "{}",
            err.message
        );
        assert_eq!(
            err.details,
            vec!["tool_07", "tool_17", "tool_00", "tool_01", "tool_02"]
        );
    }

    #[test]
    fn specs_are_sorted_and_hide_injected_arguments() {
        let registry = builtins();
        let specs = registry.specs();
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "add",
                "current_time",
                "generate_report",
                "order_lookup",
                "track_parcel"
            ]
        );
        let lookup = &specs[3].input_schema;
        assert!(lookup["properties"].get(USER_ARG).is_none());
        assert!(lookup["properties"].get("order_date").is_some());
    }

    #[test]
    fn prepare_repairs_and_reports_corrections() {
        let registry = builtins();
        let args = json!({"order_date": "2025年11月11日", "category": "Headphones", "limit": "3"});
        let (tool, prepared) = registry.prepare("order_lookup", args).unwrap();
        assert_eq!(tool.spec().name, "order_lookup");
        assert_eq!(
            prepared.arguments,
            json!({"order_date": "2025-11-11", "category": "headphones", "limit": 3})
        );
        assert_eq!(prepared.corrections.len(), 3);
    }

    #[test]
    fn prepare_passes_valid_arguments_without_corrections() {
        let registry = builtins();
        let (_, prepared) = registry.prepare("add", json!({"a": 1, "b": 2})).unwrap();
        assert_eq!(prepared.arguments, json!({"a": 1, "b": 2}));
        assert!(prepared.corrections.is_empty());
    }

    #[test]
    fn prepare_rejects_missing_filters_and_bad_values() {
        let registry = builtins();
        let Err(err) = registry.prepare("order_lookup", json!({"limit": 2})) else {
            panic!("no filter must be rejected");
        };
        assert_eq!(err.code, ToolErrorCode::InvalidArguments);
        assert_eq!(
            err.details,
            vec!["/: needs at least one of: order_id, order_date, category"]
        );
        let Err(err) = registry.prepare("add", json!({"a": "one", "b": 2})) else {
            panic!("a non-numeric integer must be rejected");
        };
        assert_eq!(err.details, vec![r#"/a: "one" is not of type "integer""#]);
    }

    #[test]
    fn model_cannot_send_injected_user() {
        let registry = builtins();
        let args = json!({"category": "phone", "_user": "u-2002"});
        let Err(err) = registry.prepare("order_lookup", args) else {
            panic!("an injected key from the model must be refused");
        };
        assert_eq!(err.code, ToolErrorCode::InvalidArguments);
        assert!(err.details[0].starts_with("/_user: "), "{err:?}");
        let as_string = json!(r#"{"category": "phone", "_user": "u-2002"}"#);
        assert!(registry.prepare("order_lookup", as_string).is_err());
    }

    #[tokio::test]
    async fn injected_user_reaches_only_tools_that_declare_it() {
        let registry = builtins();
        let (tool, mut call) = registry
            .prepare("order_lookup", json!({"order_date": "2025/11/11"}))
            .unwrap();
        assert!(registry.inject_user("order_lookup", &mut call, "u-1001"));
        let out = tool.call(call.arguments).await.unwrap();
        assert_eq!(out["count"], json!(2));
        let (_, mut add_call) = registry.prepare("add", json!({"a": 1, "b": 2})).unwrap();
        assert!(!registry.inject_user("add", &mut add_call, "u-1001"));
        assert!(add_call.arguments.get(USER_ARG).is_none());
    }

    #[test]
    fn timeout_of_reports_the_tools_own_timeout() {
        let registry = builtins();
        assert_eq!(registry.timeout_of("add"), Some(Duration::from_secs(5)));
        assert_eq!(registry.timeout_of("missing"), None);
        registry.register(fake("slow", json!({}))).unwrap();
        assert_eq!(registry.timeout_of("slow"), Some(Duration::from_secs(30)));
    }

    #[test]
    fn config_override_changes_the_definition_and_timeout() {
        let defines: Vec<ToolDefineConfig> = vec![toml::from_str(
            "name = \"add\"\nrisk = \"high\"\neffect = \"write\"\ntimeout_secs = 9",
        )
        .unwrap()];
        let registry = ToolRegistry::with_overrides(&defines);
        let data = BuiltinData::demo().unwrap();
        registry.register(builtin("add", &data).unwrap()).unwrap();
        registry
            .register(builtin("order_lookup", &data).unwrap())
            .unwrap();
        let def = registry.definition("add").unwrap();
        assert_eq!(def.risk, crate::tools::definition::ToolRisk::High);
        assert_eq!(def.effect, crate::tools::definition::ToolEffect::Write);
        assert_eq!(registry.timeout_of("add"), Some(Duration::from_secs(9)));
        let lookup = registry.definition("order_lookup").unwrap();
        assert!(lookup.input_schema["properties"].get(USER_ARG).is_none());
        assert_eq!(registry.definitions().len(), 2);
    }
}
