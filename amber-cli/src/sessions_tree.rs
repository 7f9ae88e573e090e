//! `sessions --tree`: the daemon's sessions with their background sub-agents (sessions whose
//! `parent` names another) beneath them, in the order they were started. A child whose
//! parent is no longer listed stands at the top level, marked orphaned. Each row shows its own
//! spend; a session with children also shows the spend of its whole subtree, since a
//! parent's budget binds its children's spend too.

use std::collections::{HashMap, HashSet};

use amber_proto::{ChildState, CostUsd, SessionInfo, SessionState, Usage};
use serde_json::Value;

use crate::render::one_line;
use crate::sessions::{aligned, short_ids};

/// One session of the tree and the background sub-agents it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Node {
    /// Where it is in the list the tree was built from.
    pub index: usize,
    /// It names a parent that is not in the list (deleted since), so it stands at the top.
    pub orphaned: bool,
    /// Its children, in the order they were made.
    pub children: Vec<Node>,
}

/// The tree of `sessions`: top-level sessions in the order given (the daemon lists newest
/// first), each child under its parent by `parent.order`. Every session appears exactly
/// once, even one caught in a loop of parent links (which no daemon makes): it is then
/// shown at the top, orphaned, rather than dropped.
pub(crate) fn build(sessions: &[SessionInfo]) -> Vec<Node> {
    let position: HashMap<&str, usize> = sessions
        .iter()
        .enumerate()
        .map(|(i, s)| (s.session_id.as_str(), i))
        .collect();
    let parent_of = |i: usize| {
        let link = sessions[i].parent.as_ref()?;
        position
            .get(link.session_id.as_str())
            .copied()
            .filter(|&p| p != i)
    };
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in 0..sessions.len() {
        if let Some(p) = parent_of(i) {
            children.entry(p).or_default().push(i);
        }
    }
    for kids in children.values_mut() {
        kids.sort_by(|&a, &b| {
            let order = |i: usize| sessions[i].parent.as_ref().map_or(0, |l| l.order);
            order(a)
                .cmp(&order(b))
                .then_with(|| sessions[a].session_id.cmp(&sessions[b].session_id))
        });
    }
    let mut seen = HashSet::new();
    let mut roots = Vec::new();
    for (i, info) in sessions.iter().enumerate() {
        if parent_of(i).is_none() {
            roots.push(grow(i, info.parent.is_some(), &children, &mut seen));
        }
    }
    // Whatever no top-level session reaches sits in a loop of parent links.
    for i in 0..sessions.len() {
        if !seen.contains(&i) {
            roots.push(grow(i, true, &children, &mut seen));
        }
    }
    roots
}

fn grow(
    index: usize,
    orphaned: bool,
    children: &HashMap<usize, Vec<usize>>,
    seen: &mut HashSet<usize>,
) -> Node {
    seen.insert(index);
    let kids = children.get(&index).map_or(&[][..], Vec::as_slice);
    let mut grown = Vec::new();
    for &kid in kids {
        if !seen.contains(&kid) {
            grown.push(grow(kid, false, children, seen));
        }
    }
    Node {
        index,
        orphaned,
        children: grown,
    }
}

/// Tokens and dollars spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Spend {
    pub tokens: u64,
    /// `None` when no request had a known price.
    pub cost: Option<CostUsd>,
}

impl Spend {
    fn of(usage: &Usage) -> Spend {
        Spend {
            tokens: usage.total_tokens,
            cost: usage.cost_usd,
        }
    }

    fn plus(self, other: Spend) -> Spend {
        let cost = match (self.cost, other.cost) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        Spend {
            tokens: self.tokens.saturating_add(other.tokens),
            cost,
        }
    }

    /// `2200 tok $0.0022`, or `2200 tok` without a price.
    fn text(self) -> String {
        match self.cost {
            Some(cost) => format!("{} tok {cost}", self.tokens),
            None => format!("{} tok", self.tokens),
        }
    }
}

/// What `node` and every session beneath it spent.
pub(crate) fn spend_with_children(node: &Node, sessions: &[SessionInfo]) -> Spend {
    node.children
        .iter()
        .fold(Spend::of(&sessions[node.index].usage), |sum, child| {
            sum.plus(spend_with_children(child, sessions))
        })
}

fn state_name(state: SessionState) -> &'static str {
    match state {
        SessionState::Idle => "idle",
        SessionState::Running => "running",
        SessionState::WaitingApproval => "waiting_approval",
    }
}

/// A child's task: `running`, `delivered (end_turn)`; `orphaned` when its parent is gone;
/// `-` for a session that is nobody's child.
fn task_cell(info: &SessionInfo, orphaned: bool) -> String {
    let Some(link) = &info.parent else {
        return "-".to_owned();
    };
    let mut text = link.state.as_str().to_owned();
    if matches!(link.state, ChildState::Done | ChildState::Delivered)
        && let Some(result) = &link.result
    {
        text.push_str(&format!(" ({})", result.stop_reason.as_str()));
    }
    if orphaned {
        text.push_str(", orphaned");
    }
    text
}

/// The `sessions --tree` table: ID (children indented under their parent), STATE, TASK (a
/// child's `parent.state`, with its stop reason once it ended), SPEND (its own), WITH
/// CHILDREN (its subtree's, for a session with children) and TITLE.
pub(crate) fn table(sessions: &[SessionInfo], roots: &[Node]) -> String {
    let ids: Vec<&str> = sessions.iter().map(|s| s.session_id.as_str()).collect();
    let short = short_ids(&ids);
    let header: Vec<String> = ["ID", "STATE", "TASK", "SPEND", "WITH CHILDREN", "TITLE"]
        .map(str::to_owned)
        .to_vec();
    let mut rows = Vec::new();
    for root in roots {
        push_rows(root, "", "", sessions, &short, &mut rows);
    }
    aligned(&header, &rows)
}

/// `node`'s row led by `lead`, then its children's, each led by `indent` and a branch.
fn push_rows(
    node: &Node,
    lead: &str,
    indent: &str,
    sessions: &[SessionInfo],
    short: &[String],
    rows: &mut Vec<Vec<String>>,
) {
    let info = &sessions[node.index];
    let with_children = if node.children.is_empty() {
        "-".to_owned()
    } else {
        spend_with_children(node, sessions).text()
    };
    rows.push(vec![
        format!("{lead}{}", short[node.index]),
        state_name(info.state).to_owned(),
        task_cell(info, node.orphaned),
        Spend::of(&info.usage).text(),
        with_children,
        one_line(&info.title, 60),
    ]);
    let last = node.children.len().saturating_sub(1);
    for (i, child) in node.children.iter().enumerate() {
        let (branch, under) = if i == last {
            ("└─ ", "   ")
        } else {
            ("├─ ", "│  ")
        };
        push_rows(
            child,
            &format!("{indent}{branch}"),
            &format!("{indent}{under}"),
            sessions,
            short,
            rows,
        );
    }
}

/// `sessions --json --tree`: each session as the daemon sent it (`raw`, in the order of
/// `sessions`), with `children` (the same, nested), `spendWithChildren` (`totalTokens` and
/// `costUsd` of it and everything beneath it) and `orphaned: true` for a child whose parent
/// is gone.
pub(crate) fn json(raw: &[Value], sessions: &[SessionInfo], roots: &[Node]) -> Value {
    Value::Array(roots.iter().map(|n| json_node(n, raw, sessions)).collect())
}

fn json_node(node: &Node, raw: &[Value], sessions: &[SessionInfo]) -> Value {
    let mut out = raw.get(node.index).cloned().unwrap_or(Value::Null);
    let spend = spend_with_children(node, sessions);
    if let Value::Object(map) = &mut out {
        let mut sum = serde_json::Map::new();
        sum.insert("totalTokens".into(), spend.tokens.into());
        if let Some(cost) = spend.cost {
            sum.insert("costUsd".into(), cost.usd().into());
        }
        map.insert("spendWithChildren".into(), Value::Object(sum));
        if node.orphaned {
            map.insert("orphaned".into(), Value::Bool(true));
        }
        map.insert(
            "children".into(),
            Value::Array(
                node.children
                    .iter()
                    .map(|c| json_node(c, raw, sessions))
                    .collect(),
            ),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A session; `parent` is `(parent id, order, child state)`.
    fn info(
        id: &str,
        parent: Option<(&str, u64, &str)>,
        tokens: u64,
        cost: Option<f64>,
    ) -> SessionInfo {
        let mut v = json!({
            "sessionId": id, "cwd": "/ws", "mode": "write", "model": "m", "title": id,
            "state": "idle", "createdAt": "2026-01-01T00:00:00Z",
            "updatedAt": "2026-01-01T00:00:01Z", "usage": {"totalTokens": tokens},
        });
        if let Some(cost) = cost {
            v["usage"]["costUsd"] = json!(cost);
        }
        if let Some((parent, order, state)) = parent {
            v["parent"] = json!({"sessionId": parent, "agentId": format!("agent_{id}"),
                "task": id, "prompt": "p", "order": order, "state": state});
        }
        serde_json::from_value(v).unwrap()
    }

    /// The tree as `id` or `id!` (orphaned), children in brackets.
    fn shape(nodes: &[Node], sessions: &[SessionInfo]) -> String {
        nodes
            .iter()
            .map(|n| {
                let mut s = sessions[n.index].session_id.clone();
                if n.orphaned {
                    s.push('!');
                }
                if !n.children.is_empty() {
                    s.push_str(&format!("[{}]", shape(&n.children, sessions)));
                }
                s
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn children_go_under_their_parent_by_order_and_orphans_stay_on_top() {
        let cases: &[(&str, Vec<SessionInfo>, &str)] = &[
            ("no sessions", vec![], ""),
            (
                "no children: the daemon's order",
                vec![info("b", None, 0, None), info("a", None, 0, None)],
                "b a",
            ),
            (
                "children by parent.order, not list order",
                vec![
                    info("c2", Some(("p", 20, "running")), 0, None),
                    info("p", None, 0, None),
                    info("c1", Some(("p", 10, "queued")), 0, None),
                ],
                "p[c1 c2]",
            ),
            (
                "a grandchild under its own parent",
                vec![
                    info("p", None, 0, None),
                    info("c", Some(("p", 1, "running")), 0, None),
                    info("g", Some(("c", 1, "running")), 0, None),
                ],
                "p[c[g]]",
            ),
            (
                "a child whose parent is gone",
                vec![
                    info("o", Some(("gone", 1, "done")), 0, None),
                    info("p", None, 0, None),
                ],
                "o! p",
            ),
            (
                "a loop of parent links keeps every session",
                vec![
                    info("x", Some(("y", 1, "running")), 0, None),
                    info("y", Some(("x", 1, "running")), 0, None),
                    info("z", Some(("z", 1, "running")), 0, None),
                ],
                "z! x![y]",
            ),
        ];
        for (what, sessions, want) in cases {
            assert_eq!(shape(&build(sessions), sessions), *want, "{what}");
        }
    }

    #[test]
    fn a_parent_spends_with_its_children_and_a_price_counts_where_known() {
        let cases: &[(&str, Vec<SessionInfo>, Spend)] = &[
            (
                "alone",
                vec![info("p", None, 100, Some(0.5))],
                Spend {
                    tokens: 100,
                    cost: CostUsd::from_usd(0.5),
                },
            ),
            (
                "two children and a grandchild",
                vec![
                    info("p", None, 100, Some(0.5)),
                    info("c1", Some(("p", 1, "done")), 10, Some(0.25)),
                    info("c2", Some(("p", 2, "done")), 20, Some(0.25)),
                    info("g", Some(("c2", 1, "done")), 5, Some(1.0)),
                ],
                Spend {
                    tokens: 135,
                    cost: CostUsd::from_usd(2.0),
                },
            ),
            (
                "a child without a price",
                vec![
                    info("p", None, 100, None),
                    info("c", Some(("p", 1, "done")), 10, Some(0.25)),
                ],
                Spend {
                    tokens: 110,
                    cost: CostUsd::from_usd(0.25),
                },
            ),
            (
                "no price anywhere",
                vec![
                    info("p", None, 100, None),
                    info("c", Some(("p", 1, "done")), 10, None),
                ],
                Spend {
                    tokens: 110,
                    cost: None,
                },
            ),
        ];
        for (what, sessions, want) in cases {
            let roots = build(sessions);
            assert_eq!(spend_with_children(&roots[0], sessions), *want, "{what}");
        }
    }

    #[test]
    fn the_table_indents_children_with_their_task_and_spend() {
        let mut done = info("c1", Some(("parent01", 1, "delivered")), 10, Some(0.001));
        if let Some(link) = done.parent.as_mut() {
            link.result = Some(amber_proto::ChildResult {
                stop_reason: amber_proto::StopReason::EndTurn,
                text: "ok".into(),
            });
        }
        let sessions = vec![
            info("parent01", None, 100, Some(0.01)),
            done,
            info("c2", Some(("parent01", 2, "running")), 20, Some(0.002)),
            info("orphan01", Some(("gone", 1, "queued")), 0, None),
        ];
        let t = table(&sessions, &build(&sessions));
        assert_eq!(
            t,
            "ID        STATE  TASK                  SPEND           WITH CHILDREN  TITLE\n\
             parent01  idle   -                     100 tok $0.01   130 tok $0.01  parent01\n\
             ├─ c1     idle   delivered (end_turn)  10 tok $0.0010  -              c1\n\
             └─ c2     idle   running               20 tok $0.0020  -              c2\n\
             orphan01  idle   queued, orphaned      0 tok           -              orphan01\n"
        );
    }

    #[test]
    fn the_json_nests_children_with_the_sessions_as_sent() {
        let sessions = vec![
            info("p", None, 100, Some(0.5)),
            info("c", Some(("p", 1, "running")), 10, None),
            info("o", Some(("gone", 1, "running")), 1, None),
        ];
        let mut raw: Vec<Value> = sessions
            .iter()
            .map(|s| serde_json::to_value(s).unwrap())
            .collect();
        // A field this client does not know is kept.
        raw[1]["newerField"] = json!(7);
        let out = json(&raw, &sessions, &build(&sessions));
        assert_eq!(out[0]["sessionId"], "p");
        assert_eq!(
            out[0]["spendWithChildren"],
            json!({"totalTokens": 110, "costUsd": 0.5})
        );
        assert_eq!(out[0]["children"][0]["sessionId"], "c");
        assert_eq!(out[0]["children"][0]["newerField"], 7);
        assert_eq!(out[0]["children"][0]["children"], json!([]));
        assert!(out[0].get("orphaned").is_none());
        assert_eq!(out[1]["sessionId"], "o");
        assert_eq!(out[1]["orphaned"], true);
        assert_eq!(out.as_array().map(Vec::len), Some(2));
    }
}
