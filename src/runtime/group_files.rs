//! The local task group's files under the process's cleanup registry (`cleanup`): the leader's
//! claim, registered for removal until the verdict is published, and the published verdict.
//! They sit here, above `placement::local_group` (the group, its files, its followers), because
//! `placement` is a layer below `cleanup`'s users and may not name it (tests/it/layers.rs).

use crate::cleanup;
use crate::placement::local_group::{self, JoinError, LocalGroup, Proc};
use anyhow::Context;

/// What the leader of a local group does with the group's files.
pub trait GroupFiles {
    /// The leader announces itself (after removing files of finished runs). Both group files
    /// stay registered in [`cleanup::global`] while the guard lives, so an interrupted leader
    /// removes them; drop the guard after [`publish`](GroupFiles::publish), when the followers
    /// need them. Another live process holding the claim is [`JoinError::Taken`]: two tasks say
    /// local rank 0.
    fn claim(&self) -> Result<cleanup::Guard<'static>, JoinError>;

    /// The leader's exit code and report status, for the followers. Refused once an
    /// interrupted run is cleaning up, so no file is written after the cleanup removed the
    /// group's files.
    fn publish(&self, code: u8, status: &str) -> anyhow::Result<()>;
}

impl GroupFiles for LocalGroup {
    fn claim(&self) -> Result<cleanup::Guard<'static>, JoinError> {
        local_group::remove_finished_runs(self.dir());
        let (leader, exit) = (self.leader_file(), self.exit_file());
        let made = cleanup::global().make(
            || local_group::create_exclusively(&leader),
            |claimed: &Result<(), Proc>| {
                if claimed.is_ok() {
                    vec![
                        cleanup::Undo::Path(leader.clone()),
                        cleanup::Undo::Path(exit.clone()),
                    ]
                } else {
                    Vec::new()
                }
            },
        );
        match made {
            Ok((Ok(()), guard)) => {
                let _ = std::fs::remove_file(self.exit_file());
                Ok(guard)
            }
            Ok((Err(other), _nothing)) => Err(JoinError::Taken {
                rank: 0,
                other_pid: other.pid,
            }),
            Err(e) => Err(JoinError::Io(anyhow::Error::new(e).context(format!(
                "local rank 0 cannot write {} for the other local tasks; set TMPDIR to a writable directory on this node",
                leader.display()
            )))),
        }
    }

    fn publish(&self, code: u8, status: &str) -> anyhow::Result<()> {
        let me = local_group::own_proc();
        let status: String = status
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(16)
            .collect();
        let text = format!("{code} {} {} {status}\n", me.pid, me.start);
        cleanup::global()
            .make(
                || local_group::write_atomically(&self.exit_file(), &text),
                |()| Vec::new(),
            )
            .map(|((), _nothing_new)| ())
            .with_context(|| format!("cannot write {}", self.exit_file().display()))
    }
}
