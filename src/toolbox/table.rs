//! The tool table: every tool traj implements, declared once: its schema and its call
//! (its availability rule is [`super::availability`]'s, kept apart so that what only
//! asks which tools this machine can run links none of the tools).
//!
//! The names, their toolsets and their order are the catalog's
//! ([`crate::catalog::toolsets`], the same in every build and on every machine);
//! implementing a tool is its name marked `implemented` there and one [`ToolDef`] in
//! [`TOOLS`] here (a test checks the two agree). The [`Registry`](super::Registry)
//! (toolsets, schemas, availability) and [`Task`](super::Task) (dispatch) read both.
//! The schemas offered to a model follow the catalog's order, so keep an entry where it
//! is there unless the request bodies traj-run sends are meant to change (the registry
//! snapshot test says when they do). The descriptions and schemas are traj's own.

use crate::toolbox::ToolError;
use serde_json::{Value, json};

use super::browser::actions;
use super::task::Task;
use super::{ToolResult, llm_tools, web};

/// One implemented tool: its name (a [`catalog`](crate::catalog::toolsets) name marked
/// implemented there) and what it is.
pub(crate) struct ToolDef {
    pub name: &'static str,
    pub tool: Tool,
}

/// What an implemented tool is: what the model is told, when it can be offered, and
/// what a call does.
pub(crate) struct Tool {
    /// The function description the model reads.
    pub description: &'static str,
    /// The JSON schema of the arguments object.
    pub parameters: fn() -> Value,
    /// Run one call (arguments already checked to be an object).
    pub call: fn(&mut Task, &Value) -> ToolResult,
}

impl Tool {
    /// The OpenAI function schema offered to the model.
    pub fn schema(&self, name: &str) -> Value {
        json!({
            "type": "function",
            "function": {"name": name, "description": self.description, "parameters": (self.parameters)()}
        })
    }
}

/// The entry of `name`.
pub(crate) fn find(name: &str) -> Option<&'static ToolDef> {
    TOOLS.iter().find(|d| d.name == name)
}

fn outcome(r: Result<Value, ToolError>) -> ToolResult {
    match r {
        Ok(v) => ToolResult::ok(v),
        Err(e) => ToolResult::error(e),
    }
}

/// Every implemented tool (the catalog orders them).
pub(crate) const TOOLS: &[ToolDef] = &[
    // terminal
    ToolDef {
        name: "terminal",
        tool: Tool {
            description: "Run a shell command (sh -c) in this task's workspace directory and get its \
             combined stdout and stderr, plus the exit code. Each command starts from the \
             workspace (or the task's working directory); files persist between calls, \
             shell variables and `cd` do not. Commands that run longer than the timeout \
             are killed together with everything they started; processes left in the \
             background are stopped when the command ends, so run servers and long jobs \
             in the foreground with their own time limit, or start them with \
             background=true and follow them with the process tool. Long output is cut \
             in the middle with a note.",
            parameters: || {
                json!({
                    "type": "object",
                    "properties": {
                        "command": {"type": "string", "description": "The shell command to run."},
                        "timeout": {
                            "type": "integer",
                            "minimum": 1,
                            "description": "Seconds before the command is killed (capped by the run's limit); ignored with background."
                        },
                        "background": {
                            "type": "boolean",
                            "description": "Start the command in the background and return at once with a session_id for the process tool (default false). It runs until it exits, is killed, or the task ends."
                        }
                    },
                    "required": ["command"]
                })
            },
            call: |t, a| t.terminal(a),
        },
    },
    ToolDef {
        name: "process",
        tool: Tool {
            description: "Follow and control commands started with terminal(background=true), by the \
             session_id that call returned. Actions: list (every background process of \
             this task and its status), poll (status and the output printed since the \
             last poll), log (a page of the whole output by line: offset, limit; default \
             the last 200 lines), wait (block until it exits or timeout seconds pass, \
             capped by the run's command limit), kill (stop it and everything it \
             started), write (send data to its stdin as is), submit (send data and a \
             newline), close (close its stdin). At most 8 run at once; all are stopped \
             when the task ends.",
            parameters: || {
                json!({
                    "type": "object",
                    "properties": {
                        "action": {"type": "string", "enum": ["list", "poll", "log", "wait", "kill", "write", "submit", "close"], "description": "What to do."},
                        "session_id": {"type": "string", "description": "The background process (from terminal's result); needed by every action but list."},
                        "data": {"type": "string", "description": "write and submit: the text for its stdin."},
                        "timeout": {"type": "integer", "minimum": 1, "description": "wait: most seconds to block."},
                        "offset": {"type": "integer", "minimum": 0, "description": "log: first line (0-based; default: the last lines)."},
                        "limit": {"type": "integer", "minimum": 1, "description": "log: most lines (default 200)."}
                    },
                    "required": ["action"]
                })
            },
            call: |t, a| t.process(a),
        },
    },
    // file
    ToolDef {
        name: "read_file",
        tool: Tool {
            description: "Read a text file from the workspace. Lines come back numbered as \
             `N|text`; use offset and limit to page through long files. Paths are \
             relative to the workspace; nothing outside it can be read.",
            parameters: || {
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "File path, relative to the workspace."},
                        "offset": {"type": "integer", "minimum": 1, "description": "First line to return (1-based, default 1)."},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 2000, "description": "Most lines to return (default 500)."}
                    },
                    "required": ["path"]
                })
            },
            call: |t, a| outcome(t.files.read_file(a)),
        },
    },
    ToolDef {
        name: "write_file",
        tool: Tool {
            description: "Create or overwrite a file in the workspace with the given content. \
             Missing parent directories are created.",
            parameters: || {
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "File path, relative to the workspace."},
                        "content": {"type": "string", "description": "The complete new content of the file."}
                    },
                    "required": ["path", "content"]
                })
            },
            call: |t, a| outcome(t.files.write_file(a)),
        },
    },
    ToolDef {
        name: "patch",
        tool: Tool {
            description: "Edit a file by replacing an exact piece of text. old_string must occur \
             exactly once unless replace_all is true; include enough surrounding lines \
             to make it unique. An empty new_string deletes the text.",
            parameters: || {
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "File path, relative to the workspace."},
                        "old_string": {"type": "string", "description": "The exact text to find."},
                        "new_string": {"type": "string", "description": "The text to put in its place."},
                        "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."}
                    },
                    "required": ["path", "old_string", "new_string"]
                })
            },
            call: |t, a| outcome(t.files.patch(a)),
        },
    },
    ToolDef {
        name: "search_files",
        tool: Tool {
            description: "Search the workspace. With target \"content\" (default), pattern is a regular \
             expression matched against each line of text files, and matching lines come \
             back as path:line:text. With target \"files\", pattern is a glob (`*.py`, \
             `test_*`) matched against file names.",
            parameters: || {
                json!({
                    "type": "object",
                    "properties": {
                        "pattern": {"type": "string", "description": "Regular expression (content) or glob (files)."},
                        "target": {"type": "string", "enum": ["content", "files"], "description": "What to search (default content)."},
                        "path": {"type": "string", "description": "Directory to search, relative to the workspace (default: all of it)."},
                        "file_glob": {"type": "string", "description": "Content search only: search files whose name matches this glob."},
                        "limit": {"type": "integer", "minimum": 1, "description": "Most results to return (default 50)."}
                    },
                    "required": ["pattern"]
                })
            },
            call: |t, a| outcome(t.files.search_files(a)),
        },
    },
    ToolDef {
        name: "execute_code",
        tool: Tool {
            description: "Run a Python 3 program in the same sandbox as the terminal, with the \
             workspace as the current directory, and get what it prints (stdout and \
             stderr) and its exit code.",
            parameters: || {
                json!({
                    "type": "object",
                    "properties": {
                        "code": {"type": "string", "description": "The Python source to run."},
                        "timeout": {"type": "integer", "minimum": 1, "description": "Seconds before it is killed (capped by the run's limit)."}
                    },
                    "required": ["code"]
                })
            },
            call: |t, a| t.execute_code(a),
        },
    },
    // browser (its web_search is the web toolset's, below)
    ToolDef {
        name: "browser_navigate",
        tool: Tool {
            description: "Open a URL in this task's headless browser (a real Chromium: scripts run) and \
             wait for it to load. Returns the final URL and title; then read the page with \
             browser_snapshot. Only http and https pages on the public web open; a task \
             may load a limited number of pages.",
            parameters: || json!({"type": "object", "properties": {"url": {"type": "string", "description": "The address to open (https:// is assumed when no scheme is given)."}}, "required": ["url"]}),
            call: |t, a| t.browse(a, actions::navigate),
        },
    },
    ToolDef {
        name: "browser_snapshot",
        tool: Tool {
            description: "Read the current page as its accessibility tree: one element a line with its \
             role and name, e.g. `- button \"Submit\" [ref=e3]`. Elements you can act on \
             carry a ref for browser_click and browser_type; refs change with every \
             snapshot, so take a new one after the page changes.",
            parameters: || json!({"type": "object", "properties": {"full": {"type": "boolean", "description": "Return the whole page instead of the first part (default false)."}}}),
            call: |t, a| t.browse(a, actions::snapshot),
        },
    },
    ToolDef {
        name: "browser_click",
        tool: Tool {
            description: "Click an element of the page by its ref from the last browser_snapshot, and \
             wait for what the click sets off (navigation, scripts).",
            parameters: || json!({"type": "object", "properties": {"ref": {"type": "string", "description": "The element's ref from the last browser_snapshot, e.g. e12 (a leading @ is fine)."}}, "required": ["ref"]}),
            call: |t, a| t.browse(a, actions::click),
        },
    },
    ToolDef {
        name: "browser_type",
        tool: Tool {
            description: "Type text into a field of the page (input, textarea, editable element) by its \
             ref from the last browser_snapshot. The field is cleared first; input events \
             fire as if a user typed. Press Enter with browser_press to submit.",
            parameters: || json!({"type": "object", "properties": {"ref": {"type": "string", "description": "The element's ref from the last browser_snapshot, e.g. e12 (a leading @ is fine)."}, "text": {"type": "string", "description": "The text to type."}}, "required": ["ref", "text"]}),
            call: |t, a| t.browse(a, actions::type_text),
        },
    },
    ToolDef {
        name: "browser_scroll",
        tool: Tool {
            description: "Scroll the page up or down by most of a screen; returns the new scroll \
             position and the page height.",
            parameters: || json!({"type": "object", "properties": {"direction": {"type": "string", "enum": ["up", "down"], "description": "Which way to scroll."}}, "required": ["direction"]}),
            call: |t, a| t.browse(a, actions::scroll),
        },
    },
    ToolDef {
        name: "browser_back",
        tool: Tool {
            description: "Go back to the previous page in this tab's history.",
            parameters: || json!({"type": "object", "properties": {}}),
            call: |t, a| t.browse(a, actions::back),
        },
    },
    ToolDef {
        name: "browser_press",
        tool: Tool {
            description: "Press a key in the page, on whatever has focus: Enter, Tab, Escape, \
             ArrowDown, Backspace, a single character, ...",
            parameters: || json!({"type": "object", "properties": {"key": {"type": "string", "description": "The key name (as in KeyboardEvent.key)."}}, "required": ["key"]}),
            call: |t, a| t.browse(a, actions::press),
        },
    },
    ToolDef {
        name: "browser_get_images",
        tool: Tool {
            description: "List the images of the current page: each one's URL, alt text and size.",
            parameters: || json!({"type": "object", "properties": {}}),
            call: |t, a| t.browse(a, actions::get_images),
        },
    },
    ToolDef {
        name: "browser_vision",
        tool: Tool {
            description: "Take a screenshot of what the browser shows and ask the vision model a \
             question about it (layout, charts, images, CAPTCHAs the text snapshot cannot \
             describe).",
            parameters: || json!({"type": "object", "properties": {"question": {"type": "string", "description": "What to find out from the screenshot."}}, "required": ["question"]}),
            call: |t, a| t.browser_vision(a),
        },
    },
    ToolDef {
        name: "browser_console",
        tool: Tool {
            description: "Read the messages the page wrote to its JavaScript console (log, warning, \
             error), and optionally evaluate a JavaScript expression in the page and get \
             its value.",
            parameters: || json!({"type": "object", "properties": {"clear": {"type": "boolean", "description": "Clear the kept messages after reading them."}, "expression": {"type": "string", "description": "JavaScript to evaluate in the page (promises are awaited)."}}}),
            call: |t, a| t.browse(a, actions::console),
        },
    },
    ToolDef {
        name: "browser_dialog",
        tool: Tool {
            description: "Answer a JavaScript dialog (alert, confirm, prompt, beforeunload) that \
             blocks the page; browser_snapshot shows one as pending_dialog.",
            parameters: || json!({"type": "object", "properties": {"action": {"type": "string", "enum": ["accept", "dismiss"], "description": "accept (OK, or the prompt text) or dismiss (Cancel)."}, "prompt_text": {"type": "string", "description": "The answer to a prompt() dialog."}}, "required": ["action"]}),
            call: |t, a| t.browse(a, actions::dialog),
        },
    },
    // web
    ToolDef {
        name: "web_search",
        tool: Tool {
            description: "Search the web. Returns a list of results, each with title, url and a short \
             snippet; read a page in full with web_extract.",
            parameters: || {
                json!({
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "What to search for."},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 20, "description": "Most results to return (default 5)."}
                    },
                    "required": ["query"]
                })
            },
            call: |t, a| match &t.config.search {
                Some(s) => outcome(web::web_search(&t.agent, s, a)),
                None => ToolResult::error("web_search is not configured"),
            },
        },
    },
    ToolDef {
        name: "web_extract",
        tool: Tool {
            description: "Fetch web pages and return their readable text (scripts, styles and markup \
             removed) with each page's title. Accepts http and https URLs.",
            parameters: || {
                json!({
                    "type": "object",
                    "properties": {
                        "urls": {"type": "array", "items": {"type": "string"}, "maxItems": 5, "description": "Up to 5 URLs to read."}
                    },
                    "required": ["urls"]
                })
            },
            call: |t, a| outcome(web::web_extract(&t.agent, a)),
        },
    },
    // model-backed
    ToolDef {
        name: "vision_analyze",
        tool: Tool {
            description: "Look at an image and answer a question about it. The image is an http(s) URL \
             or a path to an image file in the workspace.",
            parameters: || {
                json!({
                    "type": "object",
                    "properties": {
                        "image_url": {"type": "string", "description": "http(s) URL or workspace path of the image."},
                        "question": {"type": "string", "description": "What to find out about the image."}
                    },
                    "required": ["image_url", "question"]
                })
            },
            call: |t, a| match (&t.llm, &t.config.llm) {
                (Some(client), Some(cfg)) => {
                    outcome(llm_tools::vision_analyze(client, cfg, &t.files, a))
                }
                _ => ToolResult::error("vision_analyze is not configured"),
            },
        },
    },
    ToolDef {
        name: "image_generate",
        tool: Tool {
            description: "Make an image from a text description with the run's image model. Returns \
             the image's URL, or the path of the image file saved in the workspace \
             (images/image_N.png) when the service sends the picture itself. Describe \
             subject, style, composition and colours in detail.",
            parameters: || {
                json!({
                    "type": "object",
                    "properties": {
                        "prompt": {"type": "string", "description": "What the image shows, in detail."},
                        "aspect_ratio": {"type": "string", "enum": ["landscape", "square", "portrait"], "description": "Shape: landscape (wide, default), square, or portrait (tall)."}
                    },
                    "required": ["prompt"]
                })
            },
            call: |t, a| t.image_generate(a),
        },
    },
    ToolDef {
        name: "mixture_of_agents",
        tool: Tool {
            description: "Put a hard question to several different models at once, then have another \
             model merge their answers into one. Slow and costly: keep it for problems \
             where a second opinion matters.",
            parameters: || {
                json!({
                    "type": "object",
                    "properties": {
                        "user_prompt": {"type": "string", "description": "The full question, with all the context the models need."}
                    },
                    "required": ["user_prompt"]
                })
            },
            call: |t, a| match (&t.llm, &t.config.llm) {
                (Some(client), Some(cfg)) => outcome(llm_tools::mixture_of_agents(client, cfg, a)),
                _ => ToolResult::error("mixture_of_agents is not configured"),
            },
        },
    },
];

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::catalog::toolsets;

    /// The table implements exactly the catalog's implemented names, each once.
    #[test]
    fn the_table_is_the_catalogs_implemented_tools() {
        let mut names = BTreeSet::new();
        for d in TOOLS {
            assert!(names.insert(d.name), "{} declared twice", d.name);
            assert!(
                toolsets::tool(d.name).is_some_and(|t| t.implemented),
                "{} is not an implemented catalog name",
                d.name
            );
        }
        for t in toolsets::TOOLS.iter().filter(|t| t.implemented) {
            assert!(find(t.name).is_some(), "{} has no implementation", t.name);
        }
        assert!(find("terminal").is_some());
        assert!(find("todo").is_none());
        assert!(find("nope").is_none());
    }
}
