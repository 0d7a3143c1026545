//! `update_plan`: the model keeps a plan of its task (codex's shape: `plan: [{step, status}]`,
//! optional `explanation`), and the session shows it as a `plan` event. The tool changes
//! nothing on the machine; all it can do is hand a checked plan to the [`PlanSink`].

use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use super::output::parse_args;
use super::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use crate::event::PlanData;

/// Most steps one plan may have.
pub(crate) const MAX_STEPS: usize = 50;
/// Longest step, in characters.
pub(crate) const MAX_STEP_CHARS: usize = 500;
/// Longest explanation, in characters.
pub(crate) const MAX_EXPLANATION_CHARS: usize = 2_000;

type PlanFn = dyn Fn(PlanData) + Send + Sync;

/// Where a call's plan goes (the session emits it as a `plan` event). The one channel from a
/// tool to the session's events besides process output: it takes a plan and nothing else.
#[derive(Clone, Default)]
pub struct PlanSink(Option<Arc<PlanFn>>);

impl PlanSink {
    pub fn none() -> Self {
        PlanSink(None)
    }

    pub fn new(sink: impl Fn(PlanData) + Send + Sync + 'static) -> Self {
        PlanSink(Some(Arc::new(sink)))
    }

    fn emit(&self, plan: PlanData) {
        if let Some(sink) = &self.0 {
            sink(plan);
        }
    }
}

impl fmt::Debug for PlanSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "PlanSink(..)"
        } else {
            "PlanSink(none)"
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    plan: Vec<Step>,
    #[serde(default)]
    explanation: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Step {
    step: String,
    status: Status,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Status {
    Pending,
    InProgress,
    Completed,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::InProgress => "in_progress",
            Status::Completed => "completed",
        }
    }
}

pub(crate) struct UpdatePlan;

impl Tool for UpdatePlan {
    fn name(&self) -> &'static str {
        "update_plan"
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let (plan, confirmation) = checked(parse_args(args)?)?;
            ctx.plan.emit(plan);
            Ok(ToolOutput::text(confirmation))
        })
    }
}

/// The plan as the `plan` event carries it, and the short confirmation the model gets; or
/// what is wrong with it, worded so the model can send it again.
fn checked(args: Args) -> Result<(PlanData, String), ToolError> {
    let invalid = |message: String| Err(ToolError::InvalidArguments(message));
    if args.plan.is_empty() {
        return invalid("plan has no steps: send every step of the plan".into());
    }
    if args.plan.len() > MAX_STEPS {
        return invalid(format!(
            "plan has {} steps; at most {MAX_STEPS}: merge small steps",
            args.plan.len()
        ));
    }
    for (i, step) in args.plan.iter().enumerate() {
        if step.step.trim().is_empty() {
            return invalid(format!("plan[{i}].step is empty: say what the step does"));
        }
        if step.step.chars().count() > MAX_STEP_CHARS {
            return invalid(format!(
                "plan[{i}].step is longer than {MAX_STEP_CHARS} characters: keep steps short"
            ));
        }
    }
    let explanation = args
        .explanation
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty());
    if explanation
        .as_ref()
        .is_some_and(|e| e.chars().count() > MAX_EXPLANATION_CHARS)
    {
        return invalid(format!(
            "explanation is longer than {MAX_EXPLANATION_CHARS} characters"
        ));
    }
    let done = args
        .plan
        .iter()
        .filter(|s| s.status == Status::Completed)
        .count();
    let current: Vec<&str> = args
        .plan
        .iter()
        .filter(|s| s.status == Status::InProgress)
        .map(|s| s.step.trim())
        .collect();
    let mut confirmation = format!("Plan updated: {done} of {} steps done", args.plan.len());
    if !current.is_empty() {
        confirmation.push_str(&format!("; in progress: {}", current.join("; ")));
    }
    confirmation.push('.');
    let entries = args
        .plan
        .iter()
        .map(|s| PlanData::entry(s.step.trim(), s.status.as_str()))
        .collect();
    Ok((
        PlanData {
            entries,
            explanation,
        },
        confirmation,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Mutex;

    async fn call(args: Value) -> (Result<ToolOutput, ToolError>, Vec<PlanData>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let mut ctx = ToolContext::new(std::env::temp_dir(), "c1");
        ctx.plan = PlanSink::new(move |plan| sink.lock().unwrap().push(plan));
        let result = UpdatePlan.call(args, &ctx).await;
        let plans = seen.lock().unwrap().clone();
        (result, plans)
    }

    #[tokio::test]
    async fn a_plan_goes_out_in_the_shape_every_surface_reads() {
        let (result, plans) = call(json!({
            "explanation": " found the cause ",
            "plan": [
                {"step": "Find the bug", "status": "completed"},
                {"step": " Fix it ", "status": "in_progress"},
                {"step": "Run the tests", "status": "pending"},
            ],
        }))
        .await;
        assert_eq!(
            result.unwrap().text,
            "Plan updated: 1 of 3 steps done; in progress: Fix it."
        );
        assert_eq!(plans.len(), 1);
        assert_eq!(plans[0].explanation.as_deref(), Some("found the cause"));
        assert_eq!(
            plans[0].entries,
            [
                json!({"content": "Find the bug", "priority": "medium", "status": "completed"}),
                json!({"content": "Fix it", "priority": "medium", "status": "in_progress"}),
                json!({"content": "Run the tests", "priority": "medium", "status": "pending"}),
            ]
        );
        let lines: Vec<String> = plans[0].checklist().collect();
        assert_eq!(
            lines,
            ["[x] Find the bug", "[>] Fix it", "[ ] Run the tests"]
        );
    }

    #[tokio::test]
    async fn a_bad_plan_is_refused_with_what_to_fix_and_nothing_goes_out() {
        let step = |text: &str| json!({"step": text, "status": "pending"});
        let long = "x".repeat(MAX_STEP_CHARS + 1);
        let many: Vec<Value> = (0..=MAX_STEPS).map(|i| step(&format!("s{i}"))).collect();
        for (args, expected) in [
            (json!({"plan": []}), "no steps"),
            (
                json!({"plan": [step("ok"), step("  ")]}),
                "plan[1].step is empty",
            ),
            (json!({"plan": [step(&long)]}), "longer than 500"),
            (json!({"plan": many}), "at most 50"),
            (
                json!({"plan": [{"step": "a", "status": "done"}]}),
                "unknown variant",
            ),
            (json!({"plan": [{"step": "a"}]}), "missing field `status`"),
            (
                json!({"plan": [step("a")], "explanation": "y".repeat(MAX_EXPLANATION_CHARS + 1)}),
                "explanation is longer",
            ),
            (json!({"plan": [step("a")], "extra": 1}), "unknown field"),
        ] {
            let (result, plans) = call(args.clone()).await;
            match result {
                Err(ToolError::InvalidArguments(message)) => {
                    assert!(message.contains(expected), "{args}: {message}")
                }
                other => panic!("{args}: {other:?}"),
            }
            assert!(plans.is_empty(), "{args}");
        }
    }
}
