// `rill generate`, `rill tokenize`, `rill detokenize`: offline use of a model.
#ifndef RILL_CLI_GENERATE_COMMAND_H_
#define RILL_CLI_GENERATE_COMMAND_H_

namespace rill::cli {

int RunGenerate(int argc, char** argv);
int RunTokenize(int argc, char** argv);
int RunDetokenize(int argc, char** argv);

}  // namespace rill::cli

#endif  // RILL_CLI_GENERATE_COMMAND_H_
