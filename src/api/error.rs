//! How broker errors become `{"error","code"}` replies.

use agentnotify_http::ApiError;
use hyper::StatusCode;

use crate::broker::BrokerError;
use crate::model::interaction::AnswerRefusal;

impl From<BrokerError> for ApiError {
    fn from(e: BrokerError) -> ApiError {
        match e {
            BrokerError::Invalid(msg) => ApiError::bad_request(msg.0),
            BrokerError::NotFound(what) => ApiError::not_found(format!("{what} not found")),
            BrokerError::Refused(why) => {
                let status = match why {
                    AnswerRefusal::AlreadyAnswered => StatusCode::CONFLICT,
                    _ => StatusCode::BAD_REQUEST,
                };
                ApiError::new(status, why.code(), why.to_string())
            }
            BrokerError::Store(err) => {
                tracing::error!(error = %err, "storage failure");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "the broker could not store the change; nothing was changed",
                )
            }
        }
    }
}
