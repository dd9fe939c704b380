//! Building and starting a confined command, and the handle that ends its whole tree.
//!
//! The process tree ends with the command because it lives in its own PID namespace: when
//! bwrap exits (the command finished, [`SandboxedChild::kill`], drop) the namespace's init
//! dies with it and the kernel kills everything left inside, `setsid` and double forks
//! included. When the server dies (any signal, `kill -9` too) the parent-death signal kills
//! bwrap, with the same effect.
//!
//! The parent-death signal fires when the *thread* that forked bwrap exits, not the process,
//! so bwrap is forked on one thread that lives as long as the process (see [`spawner`]);
//! forking on a blocking-pool thread would kill commands when that thread retires.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;

use rustix::process::{Pid, Signal};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};

use super::SandboxError;
use super::bwrap::{self, LIFELINE_FD, RealFs};
use super::policy::SandboxPolicy;
use super::probe::SandboxState;

/// A command confined by a policy, not yet started.
#[derive(Debug)]
pub struct SandboxCommand {
    cmd: tokio::process::Command,
    mountpoints: MountLease,
    confined: bool,
    /// The server's end of the lifeline a confined command's watchdog reads.
    lifeline: Option<std::io::PipeWriter>,
    /// The read end, open until the command is started (the child takes its own copy).
    _reader: Option<std::io::PipeReader>,
}

impl SandboxCommand {
    /// `program args` confined by `policy`, run through bubblewrap in the root. Fails with
    /// [`SandboxError::Unavailable`] when `state` has no sandbox: the caller asks the user.
    pub fn new<S: AsRef<OsStr>>(
        state: &SandboxState,
        policy: &SandboxPolicy,
        program: impl AsRef<OsStr>,
        args: &[S],
    ) -> Result<Self, SandboxError> {
        let info = match (&state.bwrap, state.available()) {
            (Some(info), true) => info,
            _ => {
                return Err(SandboxError::Unavailable {
                    reason: state
                        .reason
                        .clone()
                        .unwrap_or_else(|| "no sandbox was found".into()),
                });
            }
        };
        policy.validate()?;
        let args: Vec<OsString> = args.iter().map(|a| a.as_ref().to_os_string()).collect();
        // Planned under the lease's lock: a stand-in folder another command made is seen as
        // one, and kept until both are done.
        let (plan, lease) =
            MountLease::plan(|| bwrap::plan(info, policy, program.as_ref(), &args, &RealFs));
        let mut cmd = tokio::process::Command::new(&info.path);
        cmd.args(&plan.args);
        // Both ends are close-on-exec; the child moves the read end to LIFELINE_FD.
        let (reader, writer) = std::io::pipe().map_err(SandboxError::Spawn)?;
        let mut c = Self::finish(cmd, policy, lease, "/tmp", Some(reader));
        c.lifeline = Some(writer);
        Ok(c)
    }

    /// `program args` in the root with the policy's environment and lifetime rules but no
    /// confinement: for a session whose user turned the sandbox off, whose commands all ask
    /// the user because the machine has no sandbox, or a call the user approved to run
    /// outside the sandbox.
    pub fn unconfined<S: AsRef<OsStr>>(
        policy: &SandboxPolicy,
        program: impl AsRef<OsStr>,
        args: &[S],
    ) -> Result<Self, SandboxError> {
        policy.validate()?;
        let mut cmd = tokio::process::Command::new(program.as_ref());
        cmd.args(args);
        let tmp = std::env::temp_dir();
        Ok(Self::finish(
            cmd,
            policy,
            MountLease::default(),
            tmp.as_os_str(),
            None,
        ))
    }

    fn finish(
        mut cmd: tokio::process::Command,
        policy: &SandboxPolicy,
        mountpoints: MountLease,
        tmpdir: impl AsRef<OsStr>,
        lifeline: Option<std::io::PipeReader>,
    ) -> Self {
        use std::os::fd::AsRawFd;
        let confined = lifeline.is_some();
        let lifeline_fd = lifeline.as_ref().map(|r| r.as_raw_fd());
        cmd.env_clear()
            // A name the user listed gets its value even when the server moved it out of its
            // own environment at start (a token the user wants commands to have).
            .envs(policy.env.resolve(&|n| {
                std::env::var_os(n).or_else(|| super::secret_var(n).map(OsString::from))
            }))
            .env("TMPDIR", tmpdir)
            .current_dir(&policy.root)
            // Never the server's own stdio: on a stdio server that is the protocol stream.
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // The child leads its own group, so one signal reaches it and what it started
            // (in the sandbox, bwrap and its init before they enter the namespace).
            .process_group(0)
            .kill_on_drop(true);
        let server = rustix::process::getpid();
        // SAFETY: the closure runs between fork and exec; it calls only async-signal-safe
        // syscalls (prctl, getppid, close_range/fcntl) and allocates nothing.
        unsafe {
            cmd.pre_exec(move || in_child(server, lifeline_fd));
        }
        SandboxCommand {
            cmd,
            mountpoints,
            confined,
            lifeline: None,
            _reader: lifeline,
        }
    }

    /// Sets one variable in the command's environment (after the allow-list, so it wins).
    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Self {
        self.cmd.env(key, value);
        self
    }

    /// Where the command's stdin comes from (default: nothing).
    pub fn stdin(&mut self, cfg: impl Into<Stdio>) -> &mut Self {
        self.cmd.stdin(cfg);
        self
    }

    /// Where the command's stdout goes (default: nowhere).
    pub fn stdout(&mut self, cfg: impl Into<Stdio>) -> &mut Self {
        self.cmd.stdout(cfg);
        self
    }

    /// Where the command's stderr goes (default: nowhere).
    pub fn stderr(&mut self, cfg: impl Into<Stdio>) -> &mut Self {
        self.cmd.stderr(cfg);
        self
    }

    /// The underlying invocation (bwrap, its arguments, the environment), for logs and tests.
    pub fn as_std(&self) -> &std::process::Command {
        self.cmd.as_std()
    }

    /// Starts the command. Must be called inside a tokio runtime.
    pub async fn spawn(self) -> Result<SandboxedChild, SandboxError> {
        let SandboxCommand {
            mut cmd,
            mountpoints,
            confined,
            lifeline,
            _reader,
        } = self;
        let child = match (spawner(), tokio::runtime::Handle::try_current()) {
            (Some(tx), Ok(handle)) => {
                let (done, result) = tokio::sync::oneshot::channel();
                let job: Job = Box::new(move || {
                    let _rt = handle.enter();
                    // If the caller stopped waiting, the child is dropped here and
                    // kill_on_drop ends it.
                    let _ = done.send(cmd.spawn());
                });
                if tx.send(job).is_err() {
                    return Err(SandboxError::Spawn(io::Error::other(
                        "the sandbox's spawner thread is gone",
                    )));
                }
                result.await.map_err(|_| {
                    SandboxError::Spawn(io::Error::other("the sandbox's spawner thread is gone"))
                })?
            }
            // No spawner thread could be made: fork here; the command then also dies if this
            // thread ends, which errs on the side of killing.
            _ => cmd.spawn(),
        }
        .map_err(SandboxError::Spawn)?;
        drop(_reader);
        let pgid = child.id().and_then(|id| Pid::from_raw(id as i32));
        if let Some(p) = pgid {
            live_groups().push(p.as_raw_nonzero().get());
        }
        Ok(SandboxedChild {
            child,
            pgid,
            reaped: false,
            confined,
            lifeline,
            mountpoints,
        })
    }
}

/// In the forked child, before exec of bwrap: die with the server, put the lifeline's read end
/// at [`LIFELINE_FD`], and pass no other descriptor the server inherited or opened without
/// close-on-exec.
fn in_child(server: Pid, lifeline: Option<i32>) -> io::Result<()> {
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
    // The server may have died between fork and prctl; then no signal would ever come.
    if rustix::process::getppid() != Some(server) {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    match lifeline {
        Some(fd) => {
            if fd == LIFELINE_FD {
                // dup2 onto itself would keep close-on-exec.
                // SAFETY: fcntl on a descriptor this process owns.
                if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } != 0 {
                    return Err(io::Error::last_os_error());
                }
            } else {
                // SAFETY: dup2 between descriptors this process owns; the copy has no
                // close-on-exec flag.
                if unsafe { libc::dup2(fd, LIFELINE_FD) } != LIFELINE_FD {
                    return Err(io::Error::last_os_error());
                }
            }
            cloexec_from(LIFELINE_FD as u32 + 1);
        }
        None => cloexec_from(3),
    }
    Ok(())
}

/// Marks every descriptor from `first` up close-on-exec (stdio is already in place).
fn cloexec_from(first: u32) {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets a flag on descriptors.
    let r = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if r != 0 {
        // Kernels before 5.11: walk a generous range instead.
        for fd in first as i32..65_536 {
            // SAFETY: fcntl on a descriptor number that may not be open; EBADF is harmless.
            unsafe {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
    }
}

/// Process groups of the commands running now, so the server can end them all when it exits
/// on a signal it can catch (see [`kill_all`]).
static LIVE_GROUPS: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

fn live_groups() -> std::sync::MutexGuard<'static, Vec<i32>> {
    LIVE_GROUPS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Kills every running command's tree: for a server that exits (end of input, `SIGTERM`,
/// `SIGINT`, `SIGHUP`). A server killed outright relies on the parent-death signal instead.
pub fn kill_all() {
    for g in live_groups().drain(..) {
        if let Some(p) = Pid::from_raw(g) {
            let _ = rustix::process::kill_process_group(p, Signal::KILL);
        }
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// The thread that forks every sandboxed command; it never exits, so the parent-death signal
/// fires only when the server process dies. `None` if it could not be started.
fn spawner() -> Option<&'static mpsc::Sender<Job>> {
    static TX: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
    TX.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("garuda-sandbox-spawner".into())
            .spawn(move || {
                for job in rx {
                    job();
                }
            })
            .ok()
            .map(|_| tx)
    })
    .as_ref()
}

/// A running sandboxed command. Killing or dropping it ends the whole process tree.
#[derive(Debug)]
pub struct SandboxedChild {
    child: Child,
    pgid: Option<Pid>,
    reaped: bool,
    confined: bool,
    lifeline: Option<std::io::PipeWriter>,
    /// Dropped after the kill in [`Drop`], so the stand-in folders outlive the namespace.
    mountpoints: MountLease,
}

impl SandboxedChild {
    /// The host pid of bwrap (the command's own pid is in its namespace).
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// The command's stdin, when piped.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    /// The command's stdout, when piped.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// The command's stderr, when piped.
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    /// Waits for the command to exit and returns its status (bwrap passes it through). What
    /// the command left running is killed by the kernel as bwrap exits; pipes it held close
    /// when the last of it is gone.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        let st = self.child.wait().await?;
        self.reaped = true;
        self.mountpoints.reaped = true;
        Ok(st)
    }

    /// Kills the command and everything it started (unconfined: what stayed in its process
    /// group). Idempotent.
    pub fn kill(&mut self) {
        // Closing the lifeline makes the watchdog kill everything in the namespace, even if
        // bubblewrap is still setting it up.
        self.lifeline = None;
        if self.reaped && self.confined {
            // bwrap is gone, so is the namespace; its group id may be reused by now.
            return;
        }
        if let Some(p) = self.pgid {
            // ESRCH (already gone) is fine.
            let _ = rustix::process::kill_process_group(p, Signal::KILL);
        }
        if !self.reaped {
            let _ = self.child.start_kill();
        }
    }

    /// True when the command runs in the sandbox.
    pub fn confined(&self) -> bool {
        self.confined
    }
}

impl Drop for SandboxedChild {
    fn drop(&mut self) {
        self.kill();
        if let Some(p) = self.pgid {
            let raw = p.as_raw_nonzero().get();
            live_groups().retain(|g| *g != raw);
        }
    }
}

/// The stand-in folders (see [`bwrap::Plan::mountpoints`]) a command mounts on, counted across
/// this process's commands: the last one done removes a folder if it is still empty. Removing
/// it while another command mounts on it would detach that command's mount and leave the
/// protected path writable there; so would removing it before the command was reaped (its
/// namespace's processes are gone only then), so a command dropped unreaped leaves it.
#[derive(Debug, Default)]
struct MountLease {
    paths: Vec<PathBuf>,
    reaped: bool,
}

/// How many running commands mount on each stand-in folder.
static MOUNTPOINTS: std::sync::Mutex<Vec<(PathBuf, usize)>> = std::sync::Mutex::new(Vec::new());

fn mountpoints() -> std::sync::MutexGuard<'static, Vec<(PathBuf, usize)>> {
    MOUNTPOINTS.lock().unwrap_or_else(|p| p.into_inner())
}

impl MountLease {
    /// Runs `plan` under the count's lock and takes a lease on the folders it will create and
    /// on those another command created that it now finds in place.
    fn plan(plan: impl FnOnce() -> bwrap::Plan) -> (bwrap::Plan, MountLease) {
        let mut counts = mountpoints();
        let plan = plan();
        let mut held = Vec::new();
        for (path, n) in counts.iter_mut() {
            if plan.args.iter().any(|a| a.as_os_str() == path.as_os_str()) {
                *n += 1;
                held.push(path.clone());
            }
        }
        for p in &plan.mountpoints {
            if !held.contains(p) {
                counts.push((p.clone(), 1));
                held.push(p.clone());
            }
        }
        let lease = MountLease {
            paths: held,
            reaped: false,
        };
        (plan, lease)
    }
}

impl Drop for MountLease {
    /// Gives the lease back; the last holder removes a folder when its command was reaped.
    fn drop(&mut self) {
        if self.paths.is_empty() {
            return;
        }
        let mut counts = mountpoints();
        for p in self.paths.drain(..) {
            if let Some(i) = counts.iter().position(|(q, _)| *q == p) {
                counts[i].1 -= 1;
                if counts[i].1 == 0 {
                    counts.swap_remove(i);
                    if self.reaped {
                        // Only an empty folder goes: anything else was made by someone else.
                        let _ = std::fs::remove_dir(&p);
                    }
                }
            }
        }
    }
}
