//! A conservative splitter of shell command lines into simple commands, for
//! the policy's checks (not an interpreter).
//!
//! Why our own: the checks must see every command a line would run, and a
//! words-only splitter (such as `shlex`) does not know `;`, `&&`, `|`,
//! `$(…)`, backticks, `<(…)` or redirections, so `true; rm -rf /` would look
//! like one harmless `true` with odd arguments. This lexer removes quotes
//! and backslashes the way the shell does (so `"r"m` and `r\m` are `rm`),
//! decodes `$'…'` escapes, cuts at every control operator, and hands the
//! text of each substitution back to be split in turn. What it cannot
//! resolve (a variable's value) stays visible as `$NAME` so the caller can
//! treat an unknown program name as suspicious. Input it does not
//! understand (an unterminated quote) is an error, which the policy turns
//! into "ask".

/// One simple command: its words after quote removal, the targets of its
/// redirections, and the source text of the substitutions it contains.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimpleCommand {
    pub words: Vec<String>,
    pub redirects: Vec<String>,
    /// Inner text of `$(…)`, `` `…` ``, `<(…)` and `>(…)`, to be split and
    /// checked as command lines of their own.
    pub subs: Vec<String>,
    /// Whether the first word came (in part) from an expansion the lexer
    /// cannot resolve (`$X`, `${X}`, `$(…)`, a backtick).
    pub program_expanded: bool,
}

/// Commands joined by `|`: the output of each flows into the next.
pub type Pipeline = Vec<SimpleCommand>;

/// Why a line could not be split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellSyntax(pub String);

/// Deepest nesting of substitutions followed (deeper is refused).
const MAX_DEPTH: usize = 16;

/// Split a command line into pipelines of simple commands.
pub fn split(line: &str) -> Result<Vec<Pipeline>, ShellSyntax> {
    Lexer {
        chars: line.chars().collect(),
        pos: 0,
    }
    .run()
}

struct Lexer {
    chars: Vec<char>,
    pos: usize,
}

/// The word being built and whether it holds an unresolved expansion.
#[derive(Default)]
struct Word {
    text: String,
    started: bool,
    expanded: bool,
}

#[derive(Default)]
struct State {
    pipelines: Vec<Pipeline>,
    pipeline: Pipeline,
    cmd: SimpleCommand,
    word: Word,
    /// The next finished word is a redirection target.
    redirect_next: bool,
}

impl State {
    fn end_word(&mut self) {
        let w = std::mem::take(&mut self.word);
        if !w.started {
            return;
        }
        if self.redirect_next {
            self.redirect_next = false;
            self.cmd.redirects.push(w.text);
        } else {
            if self.cmd.words.is_empty() {
                self.cmd.program_expanded = w.expanded;
            }
            self.cmd.words.push(w.text);
        }
    }

    fn end_command(&mut self) {
        self.end_word();
        let c = std::mem::take(&mut self.cmd);
        if !c.words.is_empty() || !c.redirects.is_empty() || !c.subs.is_empty() {
            self.pipeline.push(c);
        }
    }

    fn end_pipeline(&mut self) {
        self.end_command();
        let p = std::mem::take(&mut self.pipeline);
        if !p.is_empty() {
            self.pipelines.push(p);
        }
    }
}

impl Lexer {
    fn peek(&self, off: usize) -> Option<char> {
        self.chars.get(self.pos + off).copied()
    }

    fn run(mut self) -> Result<Vec<Pipeline>, ShellSyntax> {
        let mut s = State::default();
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            match c {
                ' ' | '\t' => s.end_word(),
                '\n' | ';' => s.end_pipeline(),
                '&' => {
                    if self.peek(0) == Some('>') {
                        // `&>file`: redirect both streams.
                        self.pos += 1;
                        if self.peek(0) == Some('>') {
                            self.pos += 1;
                        }
                        s.end_word();
                        s.redirect_next = true;
                    } else {
                        if self.peek(0) == Some('&') {
                            self.pos += 1;
                        }
                        s.end_pipeline();
                    }
                }
                '|' => {
                    if self.peek(0) == Some('|') {
                        self.pos += 1;
                        s.end_pipeline();
                    } else {
                        if self.peek(0) == Some('&') {
                            self.pos += 1;
                        }
                        s.end_command();
                    }
                }
                '(' | ')' | '{' | '}' if !s.word.started => {
                    // Subshells and groups: their contents are commands of
                    // their own. (`{`/`}` only as whole words.)
                    if (c == '{' || c == '}') && !self.at_word_end() {
                        s.word.started = true;
                        s.word.text.push(c);
                    } else {
                        s.end_pipeline();
                    }
                }
                ')' => s.end_pipeline(),
                '<' | '>' => {
                    if self.peek(0) == Some('(') {
                        // Process substitution `<(…)` / `>(…)`.
                        self.pos += 1;
                        let inner = self.balanced(')')?;
                        s.cmd.subs.push(inner);
                        s.word.started = true;
                        s.word.expanded = true;
                        s.word.text.push_str("/dev/fd/63");
                        continue;
                    }
                    // A word of digits just before is a descriptor number.
                    if s.word.started && s.word.text.chars().all(|d| d.is_ascii_digit()) {
                        s.word = Word::default();
                    }
                    s.end_word();
                    while matches!(self.peek(0), Some('<' | '>' | '|')) {
                        self.pos += 1;
                    }
                    if self.peek(0) == Some('&') {
                        // `>&2`, `2>&1`: a descriptor, not a file.
                        self.pos += 1;
                        while matches!(self.peek(0), Some(d) if d.is_ascii_digit() || d == '-') {
                            self.pos += 1;
                        }
                    } else {
                        s.redirect_next = true;
                    }
                }
                '#' if !s.word.started => {
                    while let Some(n) = self.peek(0) {
                        if n == '\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                '\\' => match self.peek(0) {
                    Some('\n') => self.pos += 1,
                    Some(n) => {
                        self.pos += 1;
                        s.word.started = true;
                        s.word.text.push(n);
                    }
                    None => {}
                },
                '\'' => {
                    s.word.started = true;
                    loop {
                        match self.peek(0) {
                            None => return Err(ShellSyntax("a ' quote is not closed".into())),
                            Some('\'') => {
                                self.pos += 1;
                                break;
                            }
                            Some(n) => {
                                self.pos += 1;
                                s.word.text.push(n);
                            }
                        }
                    }
                }
                '"' => {
                    s.word.started = true;
                    loop {
                        match self.peek(0) {
                            None => return Err(ShellSyntax("a \" quote is not closed".into())),
                            Some('"') => {
                                self.pos += 1;
                                break;
                            }
                            Some('\\') => {
                                self.pos += 1;
                                match self.peek(0) {
                                    Some(n @ ('"' | '\\' | '$' | '`')) => {
                                        self.pos += 1;
                                        s.word.text.push(n);
                                    }
                                    Some('\n') => self.pos += 1,
                                    _ => s.word.text.push('\\'),
                                }
                            }
                            Some('$') => {
                                self.pos += 1;
                                self.dollar(&mut s)?;
                            }
                            Some('`') => {
                                self.pos += 1;
                                let inner = self.backtick()?;
                                s.cmd.subs.push(inner);
                                s.word.expanded = true;
                                s.word.text.push_str("$(…)");
                            }
                            Some(n) => {
                                self.pos += 1;
                                s.word.text.push(n);
                            }
                        }
                    }
                }
                '$' => {
                    if self.peek(0) == Some('\'') {
                        self.pos += 1;
                        s.word.started = true;
                        let text = self.ansi_c()?;
                        s.word.text.push_str(&text);
                    } else {
                        s.word.started = true;
                        self.dollar(&mut s)?;
                    }
                }
                '`' => {
                    let inner = self.backtick()?;
                    s.cmd.subs.push(inner);
                    s.word.started = true;
                    s.word.expanded = true;
                    s.word.text.push_str("$(…)");
                }
                c => {
                    s.word.started = true;
                    s.word.text.push(c);
                }
            }
        }
        if s.redirect_next && !s.word.started {
            return Err(ShellSyntax("a redirection has no target".into()));
        }
        s.end_pipeline();
        Ok(s.pipelines)
    }

    /// Whether the character just consumed stands alone as a word.
    fn at_word_end(&self) -> bool {
        matches!(
            self.peek(0),
            None | Some(' ' | '\t' | '\n' | ';' | '&' | '|')
        )
    }

    /// After a `$` (not `$'`): `$(…)`, `$((…))`, `${…}`, `$NAME`, `$1`.
    fn dollar(&mut self, s: &mut State) -> Result<(), ShellSyntax> {
        s.word.started = true;
        match self.peek(0) {
            Some('(') => {
                self.pos += 1;
                let inner = self.balanced(')')?;
                s.cmd.subs.push(inner);
                s.word.expanded = true;
                s.word.text.push_str("$(…)");
            }
            Some('{') => {
                self.pos += 1;
                let inner = self.balanced('}')?;
                s.word.expanded = true;
                s.word.text.push_str("${");
                s.word.text.push_str(&inner);
                s.word.text.push('}');
            }
            Some(c) if c.is_ascii_alphanumeric() || c == '_' || "@*#?$!-".contains(c) => {
                s.word.expanded = true;
                s.word.text.push('$');
                if c.is_ascii_alphabetic() || c == '_' {
                    while let Some(n) = self.peek(0) {
                        if !(n.is_ascii_alphanumeric() || n == '_') {
                            break;
                        }
                        self.pos += 1;
                        s.word.text.push(n);
                    }
                } else {
                    self.pos += 1;
                    s.word.text.push(c);
                }
            }
            _ => s.word.text.push('$'),
        }
        Ok(())
    }

    /// The text up to the matching `close`, respecting nesting and quotes;
    /// the position ends after it.
    fn balanced(&mut self, close: char) -> Result<String, ShellSyntax> {
        let open = if close == ')' { '(' } else { '{' };
        let start = self.pos;
        let mut depth = 1usize;
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            match c {
                '\\' => self.pos += 1,
                '\'' => {
                    while let Some(n) = self.peek(0) {
                        self.pos += 1;
                        if n == '\'' {
                            break;
                        }
                    }
                }
                '"' => {
                    while let Some(n) = self.peek(0) {
                        self.pos += 1;
                        if n == '\\' {
                            self.pos += 1;
                        } else if n == '"' {
                            break;
                        }
                    }
                }
                c if c == open => {
                    depth += 1;
                    if depth > MAX_DEPTH * 4 {
                        return Err(ShellSyntax("substitutions are nested too deeply".into()));
                    }
                }
                c if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(self.chars[start..self.pos - 1].iter().collect());
                    }
                }
                _ => {}
            }
        }
        Err(ShellSyntax(format!(
            "a substitution is not closed with {close:?}"
        )))
    }

    /// The text of a backtick substitution (after the opening one).
    fn backtick(&mut self) -> Result<String, ShellSyntax> {
        let mut out = String::new();
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            match c {
                '`' => return Ok(out),
                '\\' => {
                    if let Some(n) = self.peek(0) {
                        self.pos += 1;
                        if !matches!(n, '`' | '\\' | '$') {
                            out.push('\\');
                        }
                        out.push(n);
                    }
                }
                c => out.push(c),
            }
        }
        Err(ShellSyntax("a ` substitution is not closed".into()))
    }

    /// `$'…'`: ANSI-C quoting with backslash escapes (after the `'`).
    fn ansi_c(&mut self) -> Result<String, ShellSyntax> {
        let mut out = String::new();
        loop {
            let Some(c) = self.peek(0) else {
                return Err(ShellSyntax("a $' quote is not closed".into()));
            };
            self.pos += 1;
            match c {
                '\'' => return Ok(out),
                '\\' => {
                    let Some(e) = self.peek(0) else { continue };
                    self.pos += 1;
                    match e {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        'a' => out.push('\x07'),
                        'b' => out.push('\x08'),
                        'e' | 'E' => out.push('\x1b'),
                        'x' | 'u' | 'U' => {
                            let max = match e {
                                'x' => 2,
                                'u' => 4,
                                _ => 8,
                            };
                            let v = self.digits(16, max);
                            match v.and_then(char::from_u32) {
                                Some(ch) => out.push(ch),
                                None => {
                                    out.push('\\');
                                    out.push(e);
                                }
                            }
                        }
                        '0'..='7' => {
                            self.pos -= 1;
                            if let Some(ch) = self.digits(8, 3).and_then(char::from_u32) {
                                out.push(ch);
                            }
                        }
                        other => out.push(other),
                    }
                }
                c => out.push(c),
            }
        }
    }

    fn digits(&mut self, radix: u32, max: usize) -> Option<u32> {
        let mut v: Option<u32> = None;
        for _ in 0..max {
            match self.peek(0).and_then(|c| c.to_digit(radix)) {
                Some(d) => {
                    self.pos += 1;
                    v = Some(v.unwrap_or(0) * radix + d);
                }
                None => break,
            }
        }
        v
    }
}

/// Split a line and every substitution inside it (recursively) into the
/// flat list of pipelines it would run.
pub fn split_all(line: &str) -> Result<Vec<Pipeline>, ShellSyntax> {
    let mut out = Vec::new();
    let mut todo = vec![(line.to_string(), 0usize)];
    while let Some((text, depth)) = todo.pop() {
        if depth > MAX_DEPTH {
            return Err(ShellSyntax("substitutions are nested too deeply".into()));
        }
        for p in split(&text)? {
            for c in &p {
                for sub in &c.subs {
                    todo.push((sub.clone(), depth + 1));
                }
            }
            out.push(p);
        }
    }
    Ok(out)
}
