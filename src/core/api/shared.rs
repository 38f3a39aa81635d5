//! Shared text: one immutable string, cloned by reference count.

use std::rc::Rc;

/// An immutable string whose clones share one allocation.
///
/// The replies of push, pop and ack carry the same few strings on every message of a partition (queue,
/// partition name, partition id, lease id, group), and a stored message's ids are handed to every reply
/// that delivers it. Made once and shared, they cost one allocation per partition or per message
/// instead of one per copy (docs/decisions.md, "Core speed, second pass"). It reads like a `&str`
/// (`Deref`), compares with `str`, `&str` and `String`, and serializes as a JSON string.
///
/// It may also be a part of a larger shared text ([`SharedStr::within`]): a segment read back from the
/// store keeps its JSON text once, and its messages' ids are places in it, so reading a segment and
/// evicting it cost no allocation per message (docs/decisions.md, "Core pop+ack, third pass").
#[derive(Clone)]
pub struct SharedStr {
    text: Rc<str>,
    start: u32,
    end: u32,
}

impl SharedStr {
    /// The text. Read at nearly every step of a push, pop and ack, so it is inlined and does not check
    /// its bounds again: they were checked once, when it was made.
    #[inline]
    pub fn as_str(&self) -> &str {
        let range = self.start as usize..self.end as usize;
        debug_assert!(
            self.text.get(range.clone()).is_some(),
            "a part on character boundaries"
        );
        // SAFETY: `start..end` lies within `text` on character boundaries. The only constructors are
        // `within`, which returns `None` unless `text.get(start..end)` is `Some` (and both bounds fit in
        // `u32` unchanged), and `whole`, which takes `0..text.len()`. The fields are private and never
        // changed after construction, and `text` is an immutable `Rc<str>`, so the range stays valid for
        // as long as `self` lives. (Checked in tests by `every_part_reads_as_the_checked_slice`.)
        unsafe { self.text.get_unchecked(range) }
    }

    /// The part `start..end` of `text`, sharing its allocation; `None` when that is not a part of it on
    /// character boundaries.
    pub fn within(text: &Rc<str>, start: usize, end: usize) -> Option<Self> {
        text.get(start..end)?;
        Some(SharedStr {
            text: text.clone(),
            start: u32::try_from(start).ok()?,
            end: u32::try_from(end).ok()?,
        })
    }

    /// The part of `text` that `part` borrows from it (a string a parser over `text` lent), sharing its
    /// allocation; `None` when `part` is not inside `text`.
    pub fn part_of(text: &Rc<str>, part: &str) -> Option<Self> {
        let start = (part.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
        Self::within(text, start, start.checked_add(part.len())?)
    }

    /// The whole of `text`.
    fn whole(text: Rc<str>) -> Self {
        // Text held in memory is under 4 GiB (wasm32's whole address space).
        let end =
            u32::try_from(text.len()).unwrap_or_else(|_| panic!("shared text is under 4 GiB"));
        SharedStr {
            text,
            start: 0,
            end,
        }
    }

    /// True when `other` is this very text (a clone of it, or the same part of the same text), without
    /// comparing the text: an answer that writes a partition's names once tells its entries apart by it.
    pub fn is_same_part(&self, other: &SharedStr) -> bool {
        Rc::ptr_eq(&self.text, &other.text) && (self.start, self.end) == (other.start, other.end)
    }

    /// The address and length of the whole text this part keeps alive (what a cache counts once for all
    /// its parts).
    pub fn allocation(&self) -> (usize, usize) {
        (self.text.as_ptr() as usize, self.text.len())
    }

    /// True when both share one allocation (tests).
    #[cfg(test)]
    pub(crate) fn shares_with(&self, other: &SharedStr) -> bool {
        Rc::ptr_eq(&self.text, &other.text)
    }
}

impl Default for SharedStr {
    fn default() -> Self {
        SharedStr::whole(Rc::from(""))
    }
}

impl PartialEq for SharedStr {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for SharedStr {}

impl PartialOrd for SharedStr {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SharedStr {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::hash::Hash for SharedStr {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl std::ops::Deref for SharedStr {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for SharedStr {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl std::borrow::Borrow<str> for SharedStr {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for SharedStr {
    #[inline(never)]
    fn from(text: &str) -> Self {
        SharedStr::whole(Rc::from(text))
    }
}

impl From<String> for SharedStr {
    fn from(text: String) -> Self {
        SharedStr::from(text.as_str())
    }
}

impl From<&String> for SharedStr {
    fn from(text: &String) -> Self {
        SharedStr::from(text.as_str())
    }
}

/// The same text, shared (a clone).
impl From<&SharedStr> for SharedStr {
    fn from(text: &SharedStr) -> Self {
        text.clone()
    }
}

impl From<&SharedStr> for String {
    fn from(text: &SharedStr) -> Self {
        text.as_str().to_string()
    }
}

impl From<SharedStr> for String {
    fn from(text: SharedStr) -> Self {
        text.as_str().to_string()
    }
}

impl PartialEq<str> for SharedStr {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for SharedStr {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for SharedStr {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<SharedStr> for String {
    fn eq(&self, other: &SharedStr) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<SharedStr> for &str {
    fn eq(&self, other: &SharedStr) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<SharedStr> for str {
    fn eq(&self, other: &SharedStr) -> bool {
        self == other.as_str()
    }
}

impl std::fmt::Debug for SharedStr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for SharedStr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for SharedStr {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn clones_share_and_compare_as_text() {
        let a = SharedStr::from("queue-1");
        let b = a.clone();
        assert!(a.shares_with(&b), "a clone shares the allocation");
        assert_eq!(a, "queue-1");
        assert_eq!("queue-1", a);
        assert_eq!(a, "queue-1".to_string());
        assert_eq!(a.len(), 7);
        assert_eq!(format!("{a}/{a:?}"), "queue-1/\"queue-1\"");
        assert_eq!(serde_json::to_string(&a).unwrap(), "\"queue-1\"");
        assert!(a.is_same_part(&b));
        assert!(
            !a.is_same_part(&SharedStr::from("queue-1")),
            "equal text, another allocation"
        );
        assert_eq!(String::from(b), "queue-1");
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn parts_of_a_text_share_it_and_compare_by_their_own_text() {
        let text: Rc<str> = Rc::from("[\"ab\",\"é\"]");
        let ab = SharedStr::within(&text, 2, 4).unwrap();
        let e = SharedStr::within(&text, 7, 9).unwrap();
        assert_eq!((ab.as_str(), e.as_str()), ("ab", "é"));
        assert!(ab.shares_with(&e) && ab.shares_with(&ab.clone()));
        assert!(
            ab.is_same_part(&ab.clone()) && !ab.is_same_part(&e),
            "parts of one text"
        );
        let whole_ab = SharedStr::from("ab");
        assert_eq!(ab, whole_ab);
        assert!(ab < e && whole_ab < e);
        assert_eq!(serde_json::to_string(&e).unwrap(), "\"é\"");
        assert_eq!(
            SharedStr::within(&text, 7, 8),
            None,
            "not on a character boundary"
        );
        assert_eq!(SharedStr::within(&text, 2, 40), None, "beyond the text");
        let lent = SharedStr::part_of(&text, &text[7..9]).unwrap();
        assert!(lent.shares_with(&e) && lent == "é");
        let elsewhere: Rc<str> = Rc::from("ab");
        assert_eq!(
            SharedStr::part_of(&text, &elsewhere),
            None,
            "not a part of it"
        );
        assert_eq!(
            SharedStr::part_of(&elsewhere, &text),
            None,
            "not a part of it"
        );
        assert_eq!(SharedStr::default(), "");
    }

    /// `as_str` reads without checking its bounds: every part any constructor accepts must read as the
    /// checked slice, and every part off a character boundary or beyond the text must be refused.
    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn every_part_reads_as_the_checked_slice() {
        let text: Rc<str> = Rc::from("aé😀\u{0}z");
        for start in 0..=text.len() + 1 {
            for end in 0..=text.len() + 1 {
                let checked = text.get(start..end);
                let part = SharedStr::within(&text, start, end);
                assert_eq!(
                    part.as_ref().map(SharedStr::as_str),
                    checked,
                    "{start}..{end}"
                );
                if let Some(part) = part {
                    let lent = SharedStr::part_of(&text, part.as_str()).unwrap();
                    assert_eq!(lent.as_str(), part.as_str());
                }
            }
        }
        let whole = SharedStr::from(String::from("é😀"));
        assert_eq!(whole.as_str(), "é😀");
    }
}
