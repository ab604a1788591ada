// Runs tests/deploy/check_deploy.py (see its docstring) for each deploy/
// artefact: manifests of every overlay, the Dockerfile, the runtime packages
// of the binaries the images carry.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/util/python_runner.h"
#include "tests/util/subprocess.h"

namespace rill::tests::deploy {
namespace {

void ExpectChecksPass(const std::vector<std::string>& args) {
  absl::StatusOr<util::CommandResult> r = util::RunPython("tests/deploy/check_deploy.py", args);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << r->output;
  EXPECT_NE(r->output.find("0 problem(s)"), std::string::npos) << r->output;
}

TEST(DeployManifests, CpuOverlayValidatesAndFollowsTheRules) {
  ExpectChecksPass({"manifests", util::RunfilePath("deploy/k8s/overlays/cpu")});
}

TEST(DeployManifests, GpuOverlayValidatesAndFollowsTheRules) {
  ExpectChecksPass({"manifests", util::RunfilePath("deploy/k8s/overlays/gpu")});
}

TEST(DeployManifests, SingleGpuOverlayValidatesAndFollowsTheRules) {
  ExpectChecksPass({"manifests", util::RunfilePath("deploy/k8s/overlays/gpu-single")});
}

// smg in front of the engines: discovery by label with its RBAC, a locked
// control plane, and the NetworkPolicy that guards the engines' VllmEngine
// port (smg 1.13 sends them no credential).
TEST(DeployManifests, GatewayOverlayValidatesAndFollowsTheRules) {
  ExpectChecksPass({"manifests", util::RunfilePath("deploy/k8s/overlays/gateway")});
}

TEST(DeployDockerfile, LintsClean) { ExpectChecksPass({"lint", util::RunfilePath("deploy/docker/Dockerfile")}); }

TEST(DeployDockerfile, RuntimeStageInstallsEveryLibraryTheBinariesLoad) {
  std::vector<std::string> args = {"packages", util::RunfilePath("deploy/docker/Dockerfile")};
  for (const char* b : RILL_DEPLOY_BINARIES) args.push_back(util::RunfilePath(b));
  ExpectChecksPass(args);
}

// The binaries started with exactly the args and env of the manifests (paths
// mapped to this machine), probed over grpc.health.v1, then shut down.
void ExpectLaunchPasses(const std::string& overlay) {
  ExpectChecksPass({"launch", util::RunfilePath(overlay),
                    util::RunfilePath("engine/service/rill-engine"),
                    util::RunfilePath("frontend/rill-frontend"),
                    util::RunfilePath("worker/rill-worker"), util::DefaultModelPath()});
}

TEST(DeployLaunch, CpuOverlayCommandLinesServe) { ExpectLaunchPasses("deploy/k8s/overlays/cpu"); }

// Our CPU binaries stand in for the CUDA image: the two worker containers
// connect to the engine through the shared socket directory (over gloo here).
TEST(DeployLaunch, GpuOverlayWorkerContainersServe) {
  ExpectLaunchPasses("deploy/k8s/overlays/gpu");
}

// The engine's --backend=cuda becomes auto here, which serves on the CPU
// without a GPU: the rest of the command line is the manifest's.
TEST(DeployLaunch, SingleGpuOverlayCommandLinesServe) {
  ExpectLaunchPasses("deploy/k8s/overlays/gpu-single");
}

// The engine with the gateway overlay's flags (VllmEngine without a
// credential behind the NetworkPolicy) serves, "liveness" included.
TEST(DeployLaunch, GatewayOverlayCommandLinesServe) {
  ExpectLaunchPasses("deploy/k8s/overlays/gateway");
}

}  // namespace
}  // namespace rill::tests::deploy
