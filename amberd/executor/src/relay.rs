//! `amber-exec --stdio`: the pipe a transport holds (amberd's child, or `ssh host
//! amber-exec --stdio`). It relays stdin and stdout to an executor process and nothing else,
//! so that the executor outlives it: a dropped SSH connection or a killed amberd ends the
//! relay, while the executor keeps its processes and their output for a client that attaches
//! again (`--attach ID`) within the linger time.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::process::ExitCode;

/// Relays this process's stdin to `stream` and `stream` to stdout until the executor's side
/// ends (the executor hung up or stopped).
pub fn pump(stream: UnixStream) -> ExitCode {
    let mut to_executor = match stream.try_clone() {
        Ok(s) => s,
        Err(err) => {
            eprintln!("amber-exec: {err}");
            return ExitCode::FAILURE;
        }
    };
    std::thread::spawn(move || {
        let _ = io::copy(&mut io::stdin().lock(), &mut to_executor);
        // The client is gone: the executor sees this connection end, not the executor's.
        let _ = to_executor.shutdown(Shutdown::Write);
    });
    let mut from_executor = stream;
    let mut stdout = io::stdout().lock();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match from_executor.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if stdout
                    .write_all(&buf[..n])
                    .and_then(|()| stdout.flush())
                    .is_err()
                {
                    break;
                }
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    ExitCode::SUCCESS
}
