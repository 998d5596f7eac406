//! Who the process is, as the config's `[[process]]` rules match it: the executable's path and
//! the kernel's `comm` name ([`ProcessIdentity`]).

/// How a process is named, for `[[process]]` rules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessIdentity {
    /// Full path of the executable (`/proc/self/exe`).
    pub exe: Option<String>,
    /// The process name (`/proc/self/comm`; the kernel truncates it to 15 bytes).
    pub comm: Option<String>,
}

/// Longest process name the kernel keeps (`TASK_COMM_LEN - 1`).
pub(super) const COMM_MAX: usize = 15;

impl ProcessIdentity {
    /// Whether a `[[process]]` rule's `name` designates this process: a name with a `/` is
    /// compared with the executable's path; otherwise with its file name, and with the process
    /// name (a 15-byte process name matches a longer rule name it is the start of).
    pub fn matches(&self, name: &str) -> bool {
        if name.contains('/') {
            return self.exe.as_deref() == Some(name);
        }
        let exe_name = self.exe.as_deref().and_then(|e| e.rsplit('/').next());
        if exe_name == Some(name) {
            return true;
        }
        match self.comm.as_deref() {
            Some(comm) if comm == name => true,
            Some(comm) => {
                comm.len() == COMM_MAX
                    && name.len() > COMM_MAX
                    && name.as_bytes().starts_with(comm.as_bytes())
            }
            None => false,
        }
    }
}
