//! PLACEHOLDER: being written (the claude backend).

use super::Backend;
use super::external::ExternalContext;
use crate::session::open::OpenError;

pub async fn start(context: ExternalContext) -> Result<Box<dyn Backend>, OpenError> {
    Err(OpenError::Runtime(format!(
        "the claude backend is not built yet ({})",
        context.spec
    )))
}
