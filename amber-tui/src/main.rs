//! `amber`: the terminal UI of amber. Parses arguments, runs the TUI, and prints how to come
//! back to the session it detached from (the session keeps running in amberd).

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = amber_tui::cli::Args::parse();
    let left = amber_tui::run::run(args).await;
    amber_tui::terminal::restore();
    if let Some(id) = left? {
        println!("detached from {id}; it keeps running in amberd (reattach: amber --session {id})");
    }
    Ok(())
}
