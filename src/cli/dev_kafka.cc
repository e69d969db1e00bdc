// `dcm dev-kafka`: the embedded Kafka-protocol cluster alone, with the project's topics at their
// intended partition counts (SPEC §2). First stdout line: the bootstrap address.
#include <cstdio>

#include "consumers/mock_cluster.h"
#include "consumers/topic_admin.h"
#include "src/cli/commands.h"
#include "src/common/log.h"

namespace dcm::cli {

void RegisterDevKafkaCommand(CLI::App& app, int* exit_code) {
  struct Options {
    int brokers = 1;
    Config config;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "dev-kafka", "Run the embedded in-memory Kafka cluster (librdkafka mock) with DCM's topics");
  cmd->add_option("--brokers", options->brokers, "Number of mock brokers")->check(CLI::Range(1, 5));
  cmd->add_option("--partitions", options->config.partitions,
                  "Partitions of the entity topics (the two provider topics always have 1)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--topic-prefix", options->config.topics.prefix, "Topic name prefix");
  cmd->callback([options, exit_code] {
    auto wait_for_signal = BlockTerminationSignals();
    InitLogging("info");
    auto mock = MockCluster::Create(options->brokers);
    if (!mock) {
      fprintf(stderr, "dcm dev-kafka: %s\n", mock.error().message.c_str());
      *exit_code = 1;
      return;
    }
    if (auto status = (*mock)->CreateTopics(ProjectTopics(options->config)); !status) {
      fprintf(stderr, "dcm dev-kafka: %s\n", status.error().message.c_str());
      *exit_code = 1;
      return;
    }
    printf("%s\n", (*mock)->bootstrap().c_str());
    fflush(stdout);
    Logger("dev-kafka")
        ->info("msg=\"embedded Kafka cluster up; events are held in memory only\" bootstrap={}",
               (*mock)->bootstrap());
    wait_for_signal();
    *exit_code = 0;
  });
}

}  // namespace dcm::cli
