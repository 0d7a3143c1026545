//! Window properties as text and numbers. Windows can vanish between two requests: an X
//! error about one window reads as "not there", only a broken connection is an error.

use x11rb::errors::ReplyError;
use x11rb::protocol::xproto::{Atom, AtomEnum, ConnectionExt as _, GetPropertyReply, Window};

use super::X11Desktop;
use crate::tool::ToolError;

/// Property values read at most (in 32-bit units): 16 KiB, ample for a title or a client list.
const PROPERTY_LONGS: u32 = 4096;

/// Property bytes as text: UTF-8 for `UTF8_STRING`, Latin-1 for `STRING` (ICCCM), lossy
/// UTF-8 for anything else; without trailing NULs.
pub(super) fn text(reply: &GetPropertyReply) -> String {
    let bytes = reply.value.strip_suffix(&[0]).unwrap_or(&reply.value);
    if reply.type_ == Atom::from(AtomEnum::STRING) {
        bytes.iter().map(|&b| char::from(b)).collect()
    } else {
        // UTF8_STRING, and COMPOUND_TEXT whose ASCII part this keeps.
        String::from_utf8_lossy(bytes).into_owned()
    }
}

/// `WM_CLASS` is `instance\0class\0`: the class names the application, else the instance.
pub(super) fn application(reply: &GetPropertyReply) -> String {
    let mut parts = reply
        .value
        .split(|&b| b == 0)
        .map(|part| part.iter().map(|&b| char::from(b)).collect::<String>());
    let instance = parts.next().unwrap_or_default();
    let class = parts.next().unwrap_or_default();
    if class.is_empty() { instance } else { class }
}

impl X11Desktop {
    /// A property's value; `None` when it is not set or the window is gone.
    pub(super) fn property(
        &self,
        window: Window,
        name: impl Into<Atom>,
        kind: impl Into<Atom>,
    ) -> Result<Option<GetPropertyReply>, ToolError> {
        let reply = self
            .conn
            .get_property(false, window, name, kind, 0, PROPERTY_LONGS)
            .map_err(|e| self.err(e))?
            .reply();
        match gone_is_none(reply).map_err(|e| self.err(e))? {
            Some(reply) if reply.type_ != 0 && reply.format != 0 => Ok(Some(reply)),
            _ => Ok(None),
        }
    }

    pub(super) fn property_u32s(
        &self,
        window: Window,
        name: impl Into<Atom>,
        kind: impl Into<Atom>,
    ) -> Result<Vec<u32>, ToolError> {
        Ok(self
            .property(window, name, kind)?
            .filter(|reply| reply.format == 32)
            .and_then(|reply| reply.value32().map(Iterator::collect))
            .unwrap_or_default())
    }
}

/// An X error reply (the window is gone, or never was) as `None`; a broken connection stays
/// an error.
pub(super) fn gone_is_none<T>(reply: Result<T, ReplyError>) -> Result<Option<T>, ReplyError> {
    match reply {
        Ok(value) => Ok(Some(value)),
        Err(ReplyError::X11Error(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(type_: Atom, value: &[u8]) -> GetPropertyReply {
        GetPropertyReply {
            format: 8,
            sequence: 0,
            length: 0,
            type_,
            bytes_after: 0,
            value_len: u32::try_from(value.len()).unwrap(),
            value: value.to_vec(),
        }
    }

    #[test]
    fn titles_decode_latin1_and_utf8_and_classes_prefer_the_class() {
        assert_eq!(text(&reply(AtomEnum::STRING.into(), b"caf\xe9\0")), "café");
        assert_eq!(text(&reply(300, "λ €".as_bytes())), "λ €");
        assert_eq!(application(&reply(31, b"xev\0Xev\0")), "Xev");
        assert_eq!(application(&reply(31, b"xev\0\0")), "xev");
    }
}
