//! `amber`: the terminal UI of amber. Parses arguments, runs the TUI, and prints how to come
//! back to the session it detached from (the session keeps running in amberd).

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let args = amber_tui::cli::Args::parse();
    if args.man {
        use clap::CommandFactory;
        let mut page = Vec::new();
        clap_mangen::Man::new(amber_tui::cli::Args::command()).render(&mut page)?;
        std::io::Write::write_all(&mut std::io::stdout().lock(), &page)?;
        return Ok(ExitCode::SUCCESS);
    }
    let left = amber_tui::run::run(args).await;
    amber_tui::terminal::restore();
    match left {
        Ok(left) => {
            // What was on screen stays in the terminal's scrollback, as text.
            if let Some(text) = &left.scrollback {
                println!("{text}\n");
            }
            if let Some(id) = left.session {
                println!(
                    "detached from {id}; it keeps running in amberd (reattach: amber --session {id})"
                );
            }
        }
        // Not a failure of amber: said plainly (no error chain), exit status 1.
        Err(e @ amber_tui::Error::SessionDeleted(_)) => {
            eprintln!("amber: {e}");
            return Ok(ExitCode::FAILURE);
        }
        Err(e) => return Err(e.into()),
    }
    Ok(ExitCode::SUCCESS)
}
