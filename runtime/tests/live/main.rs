//! The live providers against wiremock servers on loopback (no test touches the internet): structured output, `messages: chat` layouts, tool round trips, refused tools, 429/500, timeouts, malformed bodies, schema-violating answers, and that the API key never shows.

mod anthropic;
mod chat;
mod dialects;
mod effects;
mod limits;
mod load;
mod openai;
mod run;
mod seeds;
mod support;
