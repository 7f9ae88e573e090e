//! amber approvals as ACP permission requests: the `session/request_permission` params
//! for an `approval_requested`, and the amber decision for the client's outcome; an MCP
//! server's form (an approval with `mcp.kind = elicitation`), for a client that renders
//! forms, as `elicitation/create` and its answer. Pure.

use std::path::Path;

use amber_proto::{Approval, Decision};
use serde_json::{Value, json};

use super::updates;

pub(crate) const ALLOW_ONCE: &str = "allow_once";
pub(crate) const ALLOW_ALWAYS: &str = "allow_always";
pub(crate) const REJECT_ONCE: &str = "reject_once";

/// What amberd's scope says of a call that can never be granted beyond itself (the whole
/// scope, or its end: `bash unsandboxed: make (this call only)`).
const THIS_CALL_ONLY: &str = "this call only";

/// `session/request_permission` params: the tool call (pending) and the options —
/// `allow_always` only when the approval's scope can be granted beyond this call.
pub(crate) fn request_params(session_id: &str, asked: &Approval, cwd: &Path) -> Value {
    let mut options =
        vec![json!({"optionId": ALLOW_ONCE, "name": "Allow once", "kind": "allow_once"})];
    if !asked.scope.contains(THIS_CALL_ONLY) {
        let always = match asked.scope.as_str() {
            "" => "Always allow".to_owned(),
            scope => format!("Always allow {scope}"),
        };
        options.push(json!({"optionId": ALLOW_ALWAYS, "name": always, "kind": "allow_always"}));
    }
    options.push(json!({"optionId": REJECT_ONCE, "name": "Reject", "kind": "reject_once"}));
    json!({
        "sessionId": session_id,
        "toolCall": {
            "toolCallId": asked.call_id,
            "title": updates::tool_title(&asked.tool, &asked.arguments),
            "kind": updates::tool_kind(&asked.tool),
            "status": "pending",
            "locations": updates::locations(&asked.tool, &asked.arguments, cwd),
            "rawInput": asked.arguments,
            "content": [{"type": "content", "content": updates::text_block(&asked.reason)}],
        },
        "options": options,
    })
}

/// The amber decision for the client's answer (`RequestPermissionResponse`): a selected
/// allow option allows (`allow_always` as amber's `allow_always`: a stored rule for the
/// scope, which amberd itself narrows to the session when a rule could not hold), everything else (reject, `cancelled`, an error, an answer we
/// cannot read) denies.
pub(crate) fn decision(answer: &Result<Value, Value>) -> Decision {
    let Ok(result) = answer else {
        return Decision::Deny;
    };
    let outcome = &result["outcome"];
    if outcome["outcome"] != "selected" {
        return Decision::Deny;
    }
    match outcome["optionId"].as_str() {
        Some(ALLOW_ONCE) => Decision::AllowOnce,
        Some(ALLOW_ALWAYS) => Decision::AllowAlways,
        _ => Decision::Deny,
    }
}

/// `elicitation/create` params for an MCP server's form asked through `asked`, when it is
/// one (with a schema to render).
pub(crate) fn form_params(session_id: &str, asked: &Approval) -> Option<Value> {
    let ask = asked.mcp.as_ref()?;
    if ask.kind != amber_proto::McpAskKind::Elicitation {
        return None;
    }
    let schema = ask.requested_schema.as_ref()?;
    Some(json!({
        "sessionId": session_id,
        "toolCallId": asked.call_id,
        "mode": "form",
        "message": ask.message,
        "requestedSchema": schema,
    }))
}

/// The amber decision and form values for the client's `elicitation/create` answer: accept
/// allows once with its content; decline, cancel, an error or an answer we cannot read deny.
pub(crate) fn form_answer(answer: &Result<Value, Value>) -> (Decision, Option<Value>) {
    match answer {
        Ok(result) if result["action"] == "accept" => {
            let content = result.get("content").filter(|c| c.is_object()).cloned();
            (Decision::AllowOnce, content)
        }
        _ => (Decision::Deny, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forms_answer_becomes_the_decision_and_its_values() {
        let cases = [
            (
                Ok(json!({"action": "accept", "content": {"name": "Ada"}})),
                Decision::AllowOnce,
                Some(json!({"name": "Ada"})),
            ),
            (Ok(json!({"action": "accept"})), Decision::AllowOnce, None),
            (Ok(json!({"action": "decline"})), Decision::Deny, None),
            (Ok(json!({"action": "cancel"})), Decision::Deny, None),
            (Ok(json!({"action": "_later"})), Decision::Deny, None),
            (Err(json!({"code": -32601})), Decision::Deny, None),
        ];
        for (answer, decision, content) in cases {
            assert_eq!(form_answer(&answer), (decision, content), "{answer:?}");
        }
    }

    fn selected(id: &str) -> Result<Value, Value> {
        Ok(json!({"outcome": {"outcome": "selected", "optionId": id}}))
    }

    #[test]
    fn the_clients_choice_becomes_the_amber_decision() {
        assert_eq!(decision(&selected(ALLOW_ONCE)), Decision::AllowOnce);
        assert_eq!(decision(&selected(ALLOW_ALWAYS)), Decision::AllowAlways);
        assert_eq!(decision(&selected(REJECT_ONCE)), Decision::Deny);
        assert_eq!(
            decision(&Ok(json!({"outcome": {"outcome": "cancelled"}}))),
            Decision::Deny
        );
        assert_eq!(decision(&Err(json!({"code": -1}))), Decision::Deny);
    }

    fn approval(arguments: Value, reason: &str, scope: &str) -> Approval {
        Approval {
            request_id: "r1".into(),
            call_id: "c1".into(),
            tool: "bash".into(),
            arguments,
            reason: reason.into(),
            scope: scope.into(),
            unsandboxed: false,
            person_only: false,
            mcp: None,
        }
    }

    #[test]
    fn the_request_offers_allow_once_allow_always_and_reject_once() {
        let args = json!({"command": "rm -rf build"});
        let asked = approval(args, "deletes files", "bash:rm");
        let p = request_params("s1", &asked, Path::new("/w"));
        let kinds: Vec<&str> = p["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["allow_once", "allow_always", "reject_once"]);
        assert_eq!(p["toolCall"]["kind"], "execute");
        assert_eq!(p["toolCall"]["toolCallId"], "c1");
    }

    #[test]
    fn a_call_that_cannot_be_granted_beyond_itself_offers_no_allow_always() {
        let args = json!({"command": "cp x /etc/y"});
        for scope in [
            THIS_CALL_ONLY,
            "bash unsandboxed: make test (this call only)",
        ] {
            let asked = approval(args.clone(), "writes outside the workspace", scope);
            let p = request_params("s1", &asked, Path::new("/w"));
            let ids: Vec<&str> = p["options"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["optionId"].as_str().unwrap())
                .collect();
            assert_eq!(ids, [ALLOW_ONCE, REJECT_ONCE], "{scope}");
        }
    }
}
