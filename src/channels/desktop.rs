//! Desktop notifications (SPEC §11.6) over the session D-Bus.

use serde_json::Value;

use super::config::Channel;
use super::content::Content;
use super::{ChannelError, Hub};
use crate::model::Interaction;

/// The desktop side: not connected yet.
#[derive(Default)]
pub struct Desktop {}

impl Desktop {
    /// Whether notifications can be shown here, and if not why.
    pub fn availability(&self) -> Result<(), String> {
        Err("desktop notifications are not built in yet".into())
    }

    pub async fn show(
        &self,
        c: &Channel,
        _content: &Content,
        _question: Option<&Interaction>,
        _previous: Option<Value>,
    ) -> Result<Option<Value>, ChannelError> {
        Err(ChannelError::Unavailable(
            c.id.clone(),
            self.availability().unwrap_err(),
        ))
    }

    pub async fn close(&self, _receipt: Option<&Value>) -> Result<(), ChannelError> {
        Ok(())
    }

    pub async fn listen(&self, _hub: &Hub) {}
}
