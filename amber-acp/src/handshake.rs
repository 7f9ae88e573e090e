//! `initialize` and `authenticate`: answered by the bridge alone, never by amberd (see
//! `daemon`). Pure.
//!
//! `initialize` is read liberally — unknown fields and capabilities of shapes we do not know
//! are ignored — but it must be an object with an integer `protocolVersion`; a version other
//! than ours is answered with ours (ACP's negotiation: the client then decides whether to
//! go on). amber takes its model provider and key from amberd's configuration or
//! environment, never from the editor, so the one auth method offered says where to set
//! them, and `authenticate` with it has nothing left to do.

use serde_json::{Value, json};

use super::wire::RpcError;

/// The ACP protocol version this agent speaks.
pub(crate) const PROTOCOL_VERSION: u64 = 1;

/// The id of the one auth method offered.
pub(crate) const AUTH_METHOD: &str = "amber-config";

/// The `initialize` result for `params`, or invalid params.
pub(crate) fn initialize(params: &Value) -> Result<Value, RpcError> {
    let Some(params) = params.as_object() else {
        return Err(RpcError::invalid_params(
            "invalid params: initialize takes an object with protocolVersion",
        ));
    };
    match params.get("protocolVersion") {
        Some(v) if v.as_u64().is_some_and(|v| v <= u64::from(u16::MAX)) => {}
        Some(v) => {
            return Err(RpcError::invalid_params(format!(
                "invalid params: protocolVersion must be an integer from 0 to 65535, not {v}"
            )));
        }
        None => {
            return Err(RpcError::invalid_params(
                "invalid params: missing field `protocolVersion`",
            ));
        }
    }
    // Whatever the client asked for, we speak 1: a client that cannot disconnects.
    Ok(json!({
        "protocolVersion": PROTOCOL_VERSION,
        "agentInfo": {"name": "amber", "title": "amber", "version": env!("CARGO_PKG_VERSION")},
        "agentCapabilities": {
            "loadSession": true,
            "promptCapabilities": {"embeddedContext": true, "image": false, "audio": false},
            "mcpCapabilities": {"http": true, "sse": false},
            "sessionCapabilities": {
                "list": {},
                "resume": {},
                // Unstable in ACP v1 (`session/fork`); clients that do not know it ignore it.
                "fork": {},
            },
        },
        "authMethods": auth_methods(),
    }))
}

/// Whether the client renders forms (`clientCapabilities.elicitation.form`).
pub(crate) fn elicits_forms(params: &Value) -> bool {
    params["clientCapabilities"]["elicitation"]["form"].is_object()
}

/// The auth methods offered: one the agent handles itself (`type` omitted: `agent`).
pub(crate) fn auth_methods() -> Value {
    json!([{
        "id": AUTH_METHOD,
        "name": "amber's provider configuration",
        "description": "amber uses the model provider and API key amberd is configured with, \
            never one from the editor: set them in amber's config.toml ([provider]: flavor, \
            base_url, model, api_key_env; ~/.config/amber/config.toml) or in amberd's \
            environment (AMBER_API_KEY or the provider's own key variable such as \
            OPENAI_API_KEY, AMBER_BASE_URL, AMBER_MODEL), then check with `amber-cli doctor`. \
            Authenticating here has nothing more to do.",
    }])
}

/// The `authenticate` result for `params`: `{}` for the method offered, else invalid params.
pub(crate) fn authenticate(params: &Value) -> Result<Value, RpcError> {
    match params.get("methodId").and_then(Value::as_str) {
        Some(AUTH_METHOD) => Ok(json!({})),
        Some(other) => Err(RpcError::invalid_params(format!(
            "invalid params: unknown auth method `{other}`; this agent offers `{AUTH_METHOD}`"
        ))),
        None => Err(RpcError::invalid_params(
            "invalid params: authenticate takes an object with methodId",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::INVALID_PARAMS;

    #[test]
    fn initialize_without_an_object_or_a_protocol_version_is_invalid_params() {
        for params in [
            Value::Null,
            json!([1]),
            json!("1"),
            json!({}),
            json!({"clientCapabilities": {}}),
            json!({"protocolVersion": "1"}),
            json!({"protocolVersion": -1}),
            json!({"protocolVersion": 1.5}),
            json!({"protocolVersion": 70000}),
        ] {
            let error = initialize(&params).unwrap_err();
            assert_eq!(error.code, INVALID_PARAMS, "{params}: {error:?}");
            assert!(
                error.message.contains("protocolVersion"),
                "{params}: {error:?}"
            );
        }
    }

    #[test]
    fn any_well_formed_initialize_is_answered_with_version_1() {
        for params in [
            json!({"protocolVersion": 1}),
            json!({"protocolVersion": 0}),
            json!({"protocolVersion": 7, "clientCapabilities": {"fs": "odd"}, "extra": [1]}),
            json!({"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": true}},
                   "clientInfo": {"name": "zed", "version": "1"}, "_meta": {"x": 1}}),
        ] {
            let result = initialize(&params).unwrap_or_else(|e| panic!("{params}: {e:?}"));
            assert_eq!(result["protocolVersion"], 1, "{params}");
        }
    }

    #[test]
    fn initialize_advertises_sessions_and_one_agent_auth_method() {
        let result = initialize(&json!({"protocolVersion": 1})).unwrap();
        let caps = &result["agentCapabilities"];
        assert_eq!(caps["loadSession"], true);
        for capability in ["list", "resume", "fork"] {
            assert_eq!(
                caps["sessionCapabilities"][capability],
                json!({}),
                "{capability}"
            );
        }
        let methods = result["authMethods"].as_array().unwrap();
        assert_eq!(methods.len(), 1);
        assert_eq!(methods[0]["id"], AUTH_METHOD);
        // No `type`: ACP reads it as `agent`, the kind that needs no client support.
        assert!(methods[0].get("type").is_none());
        assert!(
            methods[0]["description"]
                .as_str()
                .unwrap()
                .contains("config.toml")
        );
    }

    #[test]
    fn authenticate_accepts_the_method_offered_and_refuses_others() {
        assert_eq!(
            authenticate(&json!({"methodId": AUTH_METHOD})).unwrap(),
            json!({})
        );
        for params in [json!({"methodId": "oauth"}), json!({}), Value::Null] {
            let error = authenticate(&params).unwrap_err();
            assert_eq!(error.code, INVALID_PARAMS, "{params}");
        }
    }
}
