//! Byte offsets (the compiler's spans) to and from LSP positions: a zero-based line and a
//! column counted in UTF-16 code units, as the protocol counts them by default.

/// The starts of the lines of one text, for converting positions both ways.
#[derive(Clone, Debug)]
pub struct LineIndex {
    text: String,
    starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(text: &str) -> LineIndex {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(at, _)| at + 1));
        LineIndex {
            text: text.to_string(),
            starts,
        }
    }

    /// The zero-based line and UTF-16 column of byte `offset` (clamped to the text, and
    /// moved back to the start of a character it falls inside).
    pub fn position(&self, offset: usize) -> (u32, u32) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|start| *start <= offset) - 1;
        let start = self.starts.get(line).copied().unwrap_or(0);
        let column: usize = self
            .text
            .get(start..offset)
            .map_or(0, |text| text.chars().map(char::len_utf16).sum());
        (to_u32(line), to_u32(column))
    }

    /// The byte offset of a zero-based line and UTF-16 column; a column past the end of
    /// its line is the line's end, a line past the end of the text is the text's end.
    pub fn offset(&self, line: u32, column: u32) -> usize {
        let Some(start) = self.starts.get(line as usize).copied() else {
            return self.text.len();
        };
        let line_text = self.text.get(start..).unwrap_or("");
        let line_text = line_text.split('\n').next().unwrap_or("");
        let mut units = 0usize;
        for (at, character) in line_text.char_indices() {
            if units >= column as usize {
                return start + at;
            }
            units += character.len_utf16();
        }
        start + line_text.trim_end_matches('\r').len()
    }
}

fn to_u32(value: usize) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_utf16_units_of_non_ascii_text() {
        // `—` is 3 bytes and 1 UTF-16 unit; `审` 3 bytes, 1 unit; `𝄞` 4 bytes, 2 units.
        let index = LineIndex::new("a — b\n审查 x\n𝄞y\n");
        assert_eq!(index.position(6), (0, 4)); // `b`
        assert_eq!(index.offset(0, 4), 6);
        let x = "a — b\n审查 ".len();
        assert_eq!(index.position(x), (1, 3));
        assert_eq!(index.offset(1, 3), x);
        let y = "a — b\n审查 x\n𝄞".len();
        assert_eq!(index.position(y), (2, 2));
        assert_eq!(index.offset(2, 2), y);
    }

    #[test]
    fn out_of_range_positions_are_clamped() {
        let index = LineIndex::new("ab\ncd");
        assert_eq!(index.offset(0, 99), 2);
        assert_eq!(index.offset(9, 0), 5);
        assert_eq!(index.position(99), (1, 2));
        // Inside a multi-byte character: its start.
        let index = LineIndex::new("—x");
        assert_eq!(index.position(1), (0, 0));
    }
}
