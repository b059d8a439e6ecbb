#include "sketchd/pipeline/extractor.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <span>
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
  const std::string doc = R"({"":"empty key","a":{"0":"member zero","":{"":"nested"}},)"
                          R"("arr":["x",{"k~/":"esc"}],)"
                          R"("m~n":"tilde","dup":"first","dup":"second","n":5})";
  // The item, or the failure's name (an item points into its extractor: copied out here).
  const auto at = [&](const char* pointer) {
    extractor e({item_source::json, pointer, "", 1024});
    const extract_result r = run(e, doc);
    return r.failure == extract_failure::none ? std::string(r.item)
                                              : "failure: " + std::string(to_string(r.failure));
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
  EXPECT_EQ(at("/n/0"), "failure: missing_field");  // into a scalar
  EXPECT_EQ(at("/a"), "failure: not_scalar");
  EXPECT_EQ(at(""), "failure: not_scalar");  // the whole document
  extractor whole({item_source::json, "", "", 1024});
  EXPECT_EQ(run(whole, R"("just a string")").item, "just a string");
  EXPECT_EQ(run(whole, "17").item, "17");
}

TEST(Extractor, ScalarsTakeTheirDocumentedText) {
  // docs/CONFIGURATION.md: integers as written, other numbers in their shortest form that
  // reads back as the same double, true and false as such.
  extractor e({item_source::json, "/v", "", 1024});
  const auto item = [&](std::string_view value) {
    return std::string(run(e, "{\"v\":" + std::string(value) + "}").item);
  };
  EXPECT_EQ(item("42"), "42");
  EXPECT_EQ(item("-7"), "-7");
  EXPECT_EQ(item("18446744073709551615"), "18446744073709551615");  // beyond int64
  EXPECT_EQ(item("12.50"), "12.5");
  EXPECT_EQ(item("12.5"), "12.5");
  EXPECT_EQ(item("12.0"), "12");
  EXPECT_EQ(item("1e2"), "100");
  EXPECT_EQ(item("0.1"), "0.1");
  EXPECT_EQ(item("1e300"), "1e+300");
  EXPECT_EQ(item("true"), "true");
  EXPECT_EQ(item("false"), "false");
  EXPECT_EQ(item(R"("a\nb\u00e9")"), "a\nb\xc3\xa9");  // strings unescaped
}

// Integers beyond 64 bits are valid JSON (simdjson's DOM parser refuses them): the document
// counts, and such an integer, when it is the item, is its digits as written.
TEST(Extractor, IntegersBeyondSixtyFourBitsAreValid) {
  extractor e({item_source::json, "/user/id", "", 1024});
  EXPECT_EQ(run(e, R"({"user":{"id":"u1"},"n":123456789012345678901234})").item, "u1");
  EXPECT_EQ(run(e, R"({"n":[1,-123456789012345678901234, 2],"user":{"id":"u2"}})").item, "u2");
  EXPECT_EQ(run(e, R"({"user":{"id":340282366920938463463374607431768211455}})").item,
            "340282366920938463463374607431768211455");
  EXPECT_EQ(run(e, R"({"user":{"id": -99999999999999999999 }})").item, "-99999999999999999999");
  EXPECT_EQ(run(e, R"({"user":{"id":-9223372036854775809}})").item, "-9223372036854775809");
  // A string that looks like one is left alone, and the document is still validated whole.
  EXPECT_EQ(
      run(e, R"({"user":{"id":"123456789012345678901234"},"s":"x\"1234567890123456789012"})").item,
      "123456789012345678901234");
  for (const std::string_view bad :
       {R"({"user":{"id":"u1"},"n":123456789012345678901234,})",
        R"({"user":{"id":"u1"},"n":0123456789012345678901234})",
        R"({"user":{"id":"u1"},"n":123456789012345678901234 5})",
        R"({"user":{"id":"u1"},"n":--123456789012345678901234})",
        R"({"user":{"id":"u1"}"n":123456789012345678901234})",
        R"({"user":{"id":"u1"},"n":123456789012345678901234x})",
        // A big integer in a key's place, after one in a value's (the first error).
        R"({"user":{"id":"u1"},"a":123456789012345678901234,123456789012345678901234 :1})",
        "{\"user\":{\"id\":\"u1\"},\"a\":123456789012345678901234,-123456789012345678901234\t:"
        "1}"}) {
    EXPECT_EQ(run(e, bad).failure, extract_failure::invalid_json) << bad;
  }
  // A big number that is not an integer is a double, as before.
  EXPECT_EQ(run(e, R"({"user":{"id":123456789012345678901234.5}})").failure, extract_failure::none);
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

// Batches give exactly the results of single messages, whatever the mix: values that are
// one document each (parsed together), and values that are not (which must not disturb
// their neighbours' results), in random orders and batch sizes, for several pointers.
TEST(Extractor, BatchResultsEqualSingleResults) {
  const std::vector<std::string> corpus = {
      R"({"user":{"id":"u1"}})",
      "  {\"user\":{\"id\":\"u2\"}}  \r\n\t",
      R"({"user":{"id":42},"seq":1})",
      R"({"user":{"id":-1.5e3}})",
      R"({"user":{"id":18446744073709551615}})",
      R"({"user":{"id":123456789012345678901234567}})",
      R"({"user":{"id":"u4"},"n":-123456789012345678901234567})",
      R"({"user":{"id":"u4"},"n":123456789012345678901234567,})",
      R"({"user":{"id":true}})",
      R"({"user":{"id":null}})",
      R"({"user":{"id":{"x":1}}})",
      R"({"user":{"id":[1,2]}})",
      R"({"user":{"id":""}})",
      R"({"user":{"id":"a\"b\\n\u00e9\ud83d\ude00"}})",
      R"({"user":{"id":"a-long-item-over-eight-bytes"}})",
      R"({"user":{}})",
      R"({"arr":["x",{"k":"v"}],"user":{"id":"u3"}})",
      R"({"user":{"id":"u1"}} trailing)",
      R"({"user":{"id":"u1"}},)",
      R"({"user":{"id":"u1"})",
      "}",
      "]",
      R"("unclosed)",
      "\"ends with a backslash\\",
      "not json",
      "",
      "   ",
      "\n",
      std::string("\xff\xfe\x00\x01", 4),
      "{\"user\":{\"id\":\"\xff\"}}",
      std::string("{\"user\":{\"id\":\"u\x00\"}}", 21),
      "{\"user\":{\"id\":\"a\nb\"}}",
      "{\"user\":{\"id\":\"u1\"}}\n{\"user\":{\"id\":\"u2\"}}",
      R"({"a":1}{"b":2})",
      "1 2",
      "17",
      "-0.0",
      R"("just a string")",
      "[]",
      "{}",
      "true",
      "nul",
      R"({"user":{"id":"u1"}}})",
      R"([{"user":{"id":"u1"}}])",
      "1{",
      "\xfb",
      // Larger than a whole batch's buffer: parsed alone.
      R"({"pad":")" + std::string(extractor::kBatchBytes, 'x') + R"(","user":{"id":"big"}})",
  };
  // The item's text, or the failure's name: what a result says, copied out.
  const auto said = [](const extract_result& r) {
    return r.failure == extract_failure::none ? "item: " + std::string(r.item)
                                              : "failure: " + std::string(to_string(r.failure));
  };
  std::mt19937_64 rng(20261123);
  for (const char* pointer : {"/user/id", "", "/arr/1/k"}) {
    for (const std::size_t max_item : {std::size_t{1024}, std::size_t{8}}) {
      extractor single({item_source::json, pointer, "", max_item});
      extractor batch({item_source::json, pointer, "", max_item});
      for (int round = 0; round < 200; ++round) {
        // Mostly valid documents (the common case), with a bad value now and then.
        std::vector<message_view> views(1 + rng() % 300);
        for (auto& v : views) v.value = corpus[rng() % 4 == 0 ? rng() % corpus.size() : rng() % 14];
        std::vector<std::string> expected;
        for (const auto& v : views) expected.push_back(said(single.extract(v)));
        std::vector<const message_view*> pointers;
        for (const auto& v : views) pointers.push_back(&v);
        std::vector<extract_result> results(views.size());
        std::size_t done = 0;
        while (done < views.size()) {
          const std::size_t n =
              batch.extract(std::span(pointers).subspan(done), std::span(results).subspan(done));
          ASSERT_GE(n, 1u);
          // Every result of the batch is still valid after the others were extracted.
          for (std::size_t i = done; i < done + n; ++i) {
            EXPECT_EQ(said(results[i]), expected[i]) << "pointer " << pointer << ", message " << i
                                                     << ": " << views[i].value.substr(0, 80);
          }
          done += n;
        }
      }
    }
  }
}

// A value with an unclosed '{' after its document, then a value that is not UTF-8: in the
// joined text "1{\n\xfb\n" simdjson reports the document "1" and then a failing one at the
// second value's start, never the '{'. The first value is still invalid JSON, as alone.
// Found by fuzzing (tests/fuzz/extractor_fuzz.cpp).
TEST(Extractor, FailureAfterAValueDoesNotProveItWhole) {
  for (const std::string_view first : {"1{", "{\"user\":{\"id\":\"u1\"}} {"}) {
    for (const std::string_view last : {"\xfb", "{\"user\":{\"id\":\"\xff\"}}", "]"}) {
      for (const bool between : {false, true}) {
        extractor batch({item_source::json, "", "", 1024});
        std::vector<message_view> views;
        for (const std::string_view v : {first, std::string_view("2"), last}) {
          if (v == "2" && !between) continue;
          views.emplace_back().value = v;
        }
        std::vector<const message_view*> pointers;
        for (const auto& v : views) pointers.push_back(&v);
        std::vector<extract_result> results(views.size());
        ASSERT_GE(batch.extract(pointers, results), 1u);
        EXPECT_EQ(results[0].failure, extract_failure::invalid_json)
            << first << (between ? " then 2" : "") << " then " << last;
      }
    }
  }
}

// Clean streams take the joined parse; a stream with bad values now and then keeps most of
// it (the values before a bad one are proven whole); a stream of mostly bad values loses
// no result either.
TEST(Extractor, BatchesParseCleanGroupsTogether) {
  const auto run_stream = [](const std::vector<std::string>& values) {
    extractor e({item_source::json, "/user/id", "", 1024});
    std::vector<message_view> views(values.size());
    std::vector<const message_view*> pointers;
    for (std::size_t i = 0; i < values.size(); ++i) {
      views[i].value = values[i];
      pointers.push_back(&views[i]);
    }
    std::vector<extract_result> results(values.size());
    std::size_t items = 0;
    for (std::size_t done = 0; done < values.size();) {
      const std::size_t n =
          e.extract(std::span(pointers).subspan(done), std::span(results).subspan(done));
      for (std::size_t i = done; i < done + n; ++i) {
        items += results[i].failure == extract_failure::none ? 1 : 0;
      }
      done += n;
    }
    return std::make_pair(e.joined_messages(), items);
  };
  std::vector<std::string> clean;
  for (int i = 0; i < 10000; ++i) clean.push_back(fmt::format(R"({{"user":{{"id":"u{}"}}}})", i));
  EXPECT_EQ(run_stream(clean), std::make_pair(std::uint64_t{10000}, std::size_t{10000}));

  std::vector<std::string> sparse = clean;
  for (std::size_t i = 50; i < sparse.size(); i += 100) sparse[i] += " trailing";
  const auto [sparse_joined, sparse_items] = run_stream(sparse);
  EXPECT_EQ(sparse_items, 9900U);
  EXPECT_GE(sparse_joined, 9000U);  // all but the bad values and the odd one before them

  std::vector<std::string> dirty = clean;
  for (std::size_t i = 0; i < dirty.size(); i += 2) dirty[i] = "not json";
  EXPECT_EQ(run_stream(dirty).second, 5000U);
}

TEST(Extractor, OneMebibyteMessageIsParsed) {
  extractor e({item_source::json, "/id", "", 1024});
  std::string big = R"({"pad":")" + std::string(1 << 20, 'x') + R"(","id":"big"})";
  EXPECT_EQ(run(e, big).item, "big");
  EXPECT_EQ(run(e, R"({"id":"small"})").item, "small");
}

// Headers for a message_view: a map as its header_context, find_in_map as its find_header.
using header_map = std::map<std::string, std::string, std::less<>>;
bool find_in_map(const void* context, std::string_view name, std::string_view* out) {
  const auto& h = *static_cast<const header_map*>(context);
  const auto it = h.find(name);
  if (it == h.end()) return false;
  *out = it->second;
  return true;
}

TEST(Extractor, KeyValueAndHeader) {
  extractor by_key({item_source::key, "", "", 1024});
  message_view m;
  m.value = "v";
  EXPECT_EQ(by_key.extract(m).failure, extract_failure::null_key);
  m.has_key = true;
  m.key = std::string_view("\x00\x01", 2);  // binary keys are items like any other
  EXPECT_EQ(by_key.extract(m).item.size(), 2u);

  extractor by_value({item_source::value, "", "", 4});
  m.value = "abcd";
  EXPECT_EQ(by_value.extract(m).item, "abcd");
  m.value = "abcde";
  EXPECT_EQ(by_value.extract(m).failure, extract_failure::oversized);

  header_map headers{{"tenant", "acme"}};
  m.header_context = &headers;
  m.find_header = &find_in_map;
  extractor by_header({item_source::header, "", "tenant", 1024});
  EXPECT_EQ(by_header.extract(m).item, "acme");
  extractor by_missing_header({item_source::header, "", "region", 1024});
  EXPECT_EQ(by_missing_header.extract(m).failure, extract_failure::missing_field);
}

// A null value (a tombstone) is no event, whatever the item comes from, the key included:
// reason "tombstone". An empty value is not null: an empty item, or invalid JSON.
TEST(Extractor, ATombstoneIsNoItemWhateverItsSource) {
  header_map headers{{"tenant", "acme"}};
  message_view tombstone;
  tombstone.has_key = true;
  tombstone.key = "user-1";
  tombstone.has_value = false;
  tombstone.header_context = &headers;
  tombstone.find_header = &find_in_map;
  for (const extractor_options& o : {extractor_options{item_source::key, "", "", 1024},
                                     extractor_options{item_source::value, "", "", 1024},
                                     extractor_options{item_source::json, "/id", "", 1024},
                                     extractor_options{item_source::header, "", "tenant", 1024}}) {
    extractor e(o);
    EXPECT_EQ(e.extract(tombstone).failure, extract_failure::tombstone);
  }
  message_view empty = tombstone;
  empty.has_value = true;
  EXPECT_EQ(extractor({item_source::key, "", "", 1024}).extract(empty).item, "user-1");
  EXPECT_EQ(extractor({item_source::value, "", "", 1024}).extract(empty).failure,
            extract_failure::empty_item);
  EXPECT_EQ(extractor({item_source::json, "/id", "", 1024}).extract(empty).failure,
            extract_failure::invalid_json);
  EXPECT_EQ(to_string(extract_failure::tombstone), "tombstone");
  EXPECT_EQ(to_string(extract_failure::null_key), "null_key");
}

// In a batch of JSON values, tombstones between documents are tombstones, and the documents
// around them keep their items.
TEST(Extractor, TombstonesInABatchOfJson) {
  extractor e({item_source::json, "/id", "", 1024});
  std::vector<message_view> views(40);
  std::vector<std::string> values(views.size());
  for (std::size_t i = 0; i < views.size(); ++i) {
    values[i] = fmt::format(R"({{"id":"u{}"}})", i);
    views[i].value = values[i];
    views[i].has_value = i % 7 != 3;
    if (!views[i].has_value) views[i].value = {};
  }
  std::vector<const message_view*> pointers;
  for (const message_view& v : views) pointers.push_back(&v);
  std::vector<extract_result> results(views.size());
  std::size_t done = 0;
  while (done < views.size()) {
    const std::size_t n =
        e.extract(std::span(pointers).subspan(done), std::span(results).subspan(done));
    for (std::size_t i = done; i < done + n; ++i) {
      if (!views[i].has_value) {
        EXPECT_EQ(results[i].failure, extract_failure::tombstone) << i;
      } else {
        EXPECT_EQ(results[i].item, fmt::format("u{}", i)) << i;
      }
    }
    done += n;
  }
}

}  // namespace
}  // namespace sketchd
