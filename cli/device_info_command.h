// `rill device-info`: prints the backend this machine would use and why.
#ifndef RILL_CLI_DEVICE_INFO_COMMAND_H_
#define RILL_CLI_DEVICE_INFO_COMMAND_H_

namespace rill::cli {

// Returns the process exit code.
int RunDeviceInfo(int argc, char** argv);

}  // namespace rill::cli

#endif  // RILL_CLI_DEVICE_INFO_COMMAND_H_
