// Config entries (store/backend.h ConfigEntry) on every backend: set, replaced, listed by kind
// and name, removed; kept across a restart by the backends that keep anything.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend_fixture.h"
#include "store/backend.h"

namespace anteroom::store {
namespace {

class ConfigConformanceTest : public conformance::BackendTest {
 protected:
  void Put(const std::string& kind, const std::string& name, const std::string& value) {
    auto r = Await<Done>([&](auto done) { b().PutConfig({kind, name, value}, done); });
    ASSERT_TRUE(r.ok()) << r.message();
  }
  std::vector<ConfigEntry> List(const std::string& kind) {
    auto r = Await<std::vector<ConfigEntry>>([&](auto done) { b().ListConfig(kind, done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : std::vector<ConfigEntry>{};
  }
  bool Delete(const std::string& kind, const std::string& name) {
    auto r = Await<bool>([&](auto done) { b().DeleteConfig(kind, name, done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() && *r;
  }
};

TEST_P(ConfigConformanceTest, EntriesAreSetListedAndRemovedByKind) {
  EXPECT_TRUE(List("webhook").empty());
  Put("webhook", "b", R"({"url":"https://b.example/"})");
  Put("webhook", "a", R"({"url":"https://a.example/"})");
  Put("other", "a", "x");
  Put("webhook", "b", R"({"url":"https://b2.example/"})");  // replaced
  std::vector<ConfigEntry> want = {{"webhook", "a", R"({"url":"https://a.example/"})"},
                                   {"webhook", "b", R"({"url":"https://b2.example/"})"}};
  EXPECT_EQ(List("webhook"), want);
  EXPECT_EQ(List("other"), (std::vector<ConfigEntry>{{"other", "a", "x"}}));
  EXPECT_TRUE(Delete("webhook", "a"));
  EXPECT_FALSE(Delete("webhook", "a"));
  EXPECT_FALSE(Delete("webhook", "never"));
  EXPECT_EQ(List("webhook"), (std::vector<ConfigEntry>{want[1]}));
  EXPECT_EQ(List("other").size(), 1u);
}

TEST_P(ConfigConformanceTest, EntriesOutliveARestart) {
  Put("webhook", "kept", "1");
  Put("webhook", "gone", "2");
  Put("webhook", "changed", "3");
  EXPECT_TRUE(Delete("webhook", "gone"));
  Put("webhook", "changed", std::string(1000, 'v'));
  if (!harness_->Restart()) GTEST_SKIP() << "this backend keeps nothing across a restart";
  std::vector<ConfigEntry> want = {{"webhook", "changed", std::string(1000, 'v')},
                                   {"webhook", "kept", "1"}};
  EXPECT_EQ(List("webhook"), want);
  // And after a snapshot that holds them, then a restart from it (the embedded backend).
  if (auto* durable = dynamic_cast<conformance::DurableHarness*>(harness_.get())) {
    durable->Compact();
    Put("webhook", "after", "4");
    ASSERT_TRUE(harness_->Restart());
    want.insert(want.begin(), {"webhook", "after", "4"});
    EXPECT_EQ(List("webhook"), want);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ConfigConformanceTest,
                         ::testing::ValuesIn(conformance::Backends()), conformance::BackendName);

}  // namespace
}  // namespace anteroom::store
