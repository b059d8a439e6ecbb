#include "sketchd/pipeline/extractor.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace sketchd {
namespace {

extract_result run(extractor& e, std::string_view value) {
  message_view m;
  m.value = value;
  return e.extract(m);
}

TEST(Extractor, JsonPointerFindsStringsAndPrintsScalars) {
  extractor e({item_source::json, "/user/id", "", 1024});
  EXPECT_EQ(run(e, R"({"user":{"id":"u1"}})").item, "u1");
  EXPECT_EQ(run(e, R"({"user":{"id":"caf\u00e9"}})").item, "caf\xc3\xa9");
  EXPECT_EQ(run(e, R"({"user":{"id":42}})").item, "42");
  EXPECT_EQ(run(e, R"({"user":{"id":-7}})").item, "-7");
  EXPECT_EQ(run(e, R"({"user":{"id":18446744073709551615}})").item, "18446744073709551615");
  EXPECT_EQ(run(e, R"({"user":{"id":1.5}})").item, "1.5");
  EXPECT_EQ(run(e, R"({"user":{"id":true}})").item, "true");
}

TEST(Extractor, ArrayIndexAndEscapedPointerTokens) {
  extractor e({item_source::json, "/a~1b/1", "", 1024});
  EXPECT_EQ(run(e, R"({"a/b":["x","y"]})").item, "y");
}

TEST(Extractor, PointerFollowsRfc6901) {
  const std::string doc = R"({"":"empty key","a":{"0":"member zero","":{"":"nested"}},"arr":["x",{"k~/":"esc"}],)"
                          R"("m~n":"tilde","dup":"first","dup":"second","n":5})";
  // The item, or the failure's name (an item points into its extractor: copied out here).
  const auto at = [&](const char* pointer) {
    extractor e({item_source::json, pointer, "", 1024});
    const extract_result r = run(e, doc);
    return r.failure == extract_failure::none ? std::string(r.item) : "failure: " + std::string(to_string(r.failure));
  };
  EXPECT_EQ(at("/"), "empty key");
  EXPECT_EQ(at("/a/0"), "member zero");  // "0" is a member name in an object
  EXPECT_EQ(at("/a//"), "nested");
  EXPECT_EQ(at("/arr/0"), "x");
  EXPECT_EQ(at("/arr/1/k~0~1"), "esc");
  EXPECT_EQ(at("/m~0n"), "tilde");
  EXPECT_EQ(at("/dup"), "first");
  EXPECT_EQ(at("/arr/2"), "failure: missing_field");   // out of bounds
  EXPECT_EQ(at("/arr/01"), "failure: missing_field");  // not an index
  EXPECT_EQ(at("/arr/-"), "failure: missing_field");   // past the end
  EXPECT_EQ(at("/arr/x"), "failure: missing_field");
  EXPECT_EQ(at("/n/0"), "failure: missing_field");     // into a scalar
  EXPECT_EQ(at("/a"), "failure: not_scalar");
  EXPECT_EQ(at(""), "failure: not_scalar");            // the whole document
  extractor whole({item_source::json, "", "", 1024});
  EXPECT_EQ(run(whole, R"("just a string")").item, "just a string");
  EXPECT_EQ(run(whole, "17").item, "17");
}

TEST(Extractor, BadJsonIsCountedByReason) {
  extractor e({item_source::json, "/user/id", "", 8});
  EXPECT_EQ(run(e, R"({"user":{"id":"u1"}} trailing)").failure, extract_failure::invalid_json);
  EXPECT_EQ(run(e, "not json at all").failure, extract_failure::invalid_json);
  EXPECT_EQ(run(e, "").failure, extract_failure::invalid_json);
  EXPECT_EQ(run(e, std::string("\xff\xfe\x00\x01", 4)).failure, extract_failure::invalid_json);
  EXPECT_EQ(run(e, "{\"user\":{\"id\":\"\xff\"}}").failure, extract_failure::invalid_json);
  EXPECT_EQ(run(e, R"({"user":{}})").failure, extract_failure::missing_field);
  EXPECT_EQ(run(e, R"({"user":"flat"})").failure, extract_failure::missing_field);
  EXPECT_EQ(run(e, R"({"user":{"id":null}})").failure, extract_failure::missing_field);
  EXPECT_EQ(run(e, R"({"user":{"id":{"x":1}}})").failure, extract_failure::not_scalar);
  EXPECT_EQ(run(e, R"({"user":{"id":[1]}})").failure, extract_failure::not_scalar);
  EXPECT_EQ(run(e, R"({"user":{"id":""}})").failure, extract_failure::empty_item);
  EXPECT_EQ(run(e, R"({"user":{"id":"123456789"}})").failure, extract_failure::oversized);
  // After failures the extractor still works.
  EXPECT_EQ(run(e, R"({"user":{"id":"ok"}})").item, "ok");
}

TEST(Extractor, OneMebibyteMessageIsParsed) {
  extractor e({item_source::json, "/id", "", 1024});
  std::string big = R"({"pad":")" + std::string(1 << 20, 'x') + R"(","id":"big"})";
  EXPECT_EQ(run(e, big).item, "big");
  EXPECT_EQ(run(e, R"({"id":"small"})").item, "small");
}

TEST(Extractor, KeyValueAndHeader) {
  extractor by_key({item_source::key, "", "", 1024});
  message_view m;
  m.value = "v";
  EXPECT_EQ(by_key.extract(m).failure, extract_failure::missing_field);
  m.has_key = true;
  m.key = std::string_view("\x00\x01", 2);  // binary keys are items like any other
  EXPECT_EQ(by_key.extract(m).item.size(), 2u);

  extractor by_value({item_source::value, "", "", 4});
  m.value = "abcd";
  EXPECT_EQ(by_value.extract(m).item, "abcd");
  m.value = "abcde";
  EXPECT_EQ(by_value.extract(m).failure, extract_failure::oversized);

  std::map<std::string, std::string, std::less<>> headers{{"tenant", "acme"}};
  m.header_context = &headers;
  m.find_header = [](const void* ctx, std::string_view name, std::string_view* out) {
    const auto& h = *static_cast<const std::map<std::string, std::string, std::less<>>*>(ctx);
    auto it = h.find(name);
    if (it == h.end()) return false;
    *out = it->second;
    return true;
  };
  extractor by_header({item_source::header, "", "tenant", 1024});
  EXPECT_EQ(by_header.extract(m).item, "acme");
  extractor by_missing_header({item_source::header, "", "region", 1024});
  EXPECT_EQ(by_missing_header.extract(m).failure, extract_failure::missing_field);
}

}  // namespace
}  // namespace sketchd
