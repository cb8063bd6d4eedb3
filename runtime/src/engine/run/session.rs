//! The end of a conversation's turn (DESIGN §9.4): the `remember` assignments evaluated in the run's final scope, traced as a `session` event, and the next session state.

use super::*;

impl Scheduler<'_> {
    /// After a turn that answered `answer`: evaluates each `remember` (a step that did not
    /// run on the way is `none`), emits the `session` event and returns the session the
    /// next turn sees. `None` when the run was given no session.
    pub(super) fn remember(
        &mut self,
        answer: &Value,
    ) -> Result<Option<crate::engine::session::Session>, RunError> {
        let (Some(session), Some(session_ir)) = (self.session.clone(), &self.spec.session) else {
            return Ok(None);
        };
        let bindings = self.bindings();
        let mut remembered = serde_json::Map::new();
        for entry in &session_ir.remember {
            let value = match evaluate(&entry.value, &bindings) {
                Ok(value) => value,
                Err(EvalError::Unbound { .. }) => Value::Null,
                Err(error) => {
                    return Err(RunError::Flow(format!(
                        "`remember {}` cannot be evaluated: {error}",
                        entry.field
                    )));
                }
            };
            remembered.insert(entry.field.clone(), value);
        }
        let next = session
            .after_turn(
                self.spec,
                &self.state.request,
                answer,
                self.state.answered_by.as_deref(),
                &remembered,
            )
            .map_err(RunError::Flow)?;
        self.current_step = None;
        match self.emit(EventKind::Session {
            turn: next.turn_count,
            remembered: remembered.into_iter().collect(),
            kept: u64::try_from(next.turns.len()).unwrap_or(u64::MAX),
        }) {
            Ok(()) | Err(Halt::Stop(_)) => {}
            Err(Halt::Error(error)) => return Err(error),
        }
        Ok(Some(next))
    }
}
