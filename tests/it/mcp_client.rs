//! corral as an MCP client, against real servers nobody here wrote (scripts/install-mcp-servers
//! puts them in a cache dir): the reference `server-everything` and `server-filesystem` from
//! npm, `mcp-server-time` and `mcp-server-git` from PyPI. The model is the fake server; each
//! test scripts the calls it makes to `SERVER__TOOL` tools.

pub(crate) mod basics;
mod everything;
mod faults;
mod gate;
mod http;
mod notebook;
