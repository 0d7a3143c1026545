//! `corral node --nats URL`: this host runs sessions for `corral serve --nats` (see
//! `cluster`). The surface reads the config and stops the node on a signal.

use super::run::{Exit, load_session_config};
use crate::cluster::NodeArgs;
use crate::error::Error;

pub async fn node(args: NodeArgs) -> Result<Exit, Error> {
    let config = load_session_config(args.config_path.as_ref(), args.no_instructions)?;
    crate::cluster::run_node(config, args, super::server::wait_for_signal()).await?;
    Ok(Exit::Ok)
}
