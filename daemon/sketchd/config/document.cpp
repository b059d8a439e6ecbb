#include "sketchd/config/document.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace sketchd::config_detail {
namespace {

// The most nodes, and bytes of scalars, that the aliases of a document may repeat of their
// anchors. The checker visits a node once per path to it, so aliases of aliases multiply
// its work (a few kilobytes can stand for billions of nodes); no configuration comes near.
constexpr std::uint64_t kMaxAliasedNodes = 1'000'000;
constexpr std::uint64_t kMaxAliasedBytes = std::uint64_t{64} << 20;

// What the parser's events tell of a YAML stream: where each document starts and its root
// node (the mark YAML::Node::Mark() gives), where every node of the first document starts,
// and the first alias by which the first document's aliases repeat more than
// kMaxAliasedNodes nodes or kMaxAliasedBytes bytes (counted without expanding anything).
// Not thread-safe; one per parse.
class document_marks : public YAML::EventHandler {
 public:
  struct document {
    YAML::Mark start;
    YAML::Mark root = YAML::Mark::null_mark();
    bool empty = false;  // the root is a null with nothing written: its mark is the next token's
  };
  std::vector<document> documents;
  std::vector<int> node_starts;  // Mark::pos of every node of the first document, in order
  std::optional<YAML::Mark> too_many_aliased;
  bool aliased_cycle = false;  // that alias is inside its own anchor: it repeats forever

  void OnDocumentStart(const YAML::Mark& mark) override {
    documents.push_back({mark});
    // Anchors are the document's own.
    anchors_.clear();
    open_.clear();
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const bool root = node(mark);
    if (root) documents.back().empty = true;
    leaf(anchor, 0);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    node(mark);
    if (documents.size() != 1) return;
    size repeated{kMaxAliasedNodes + 1, 0};
    bool cycle = true;
    if (anchor < anchors_.size() && !anchors_[anchor].open) {
      repeated = anchors_[anchor].expanded;
      cycle = false;
    }
    aliased_.nodes = saturated(aliased_.nodes + repeated.nodes);
    aliased_.bytes = saturated(aliased_.bytes + repeated.bytes);
    if (!too_many_aliased &&
        (aliased_.nodes > kMaxAliasedNodes || aliased_.bytes > kMaxAliasedBytes)) {
      too_many_aliased = mark;
      aliased_cycle = cycle;
    }
    add(repeated);
  }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                const std::string& value) override {
    node(mark);
    leaf(anchor, value.size());
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    node(mark);
    open(anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    node(mark);
    open(anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  // A node and what it holds, with its aliases expanded; saturated at a bound past both
  // limits, since nested aliases grow exponentially.
  struct size {
    std::uint64_t nodes = 0;
    std::uint64_t bytes = 0;
  };
  struct anchor_state {
    size expanded;
    bool open = false;  // its collection is still being read
  };
  struct collection {
    YAML::anchor_t anchor;
    size expanded;
  };

  static std::uint64_t saturated(std::uint64_t n) {
    return std::min(n, kMaxAliasedBytes + kMaxAliasedNodes + 1);
  }

  // Whether the node is the document's root.
  bool node(const YAML::Mark& mark) {
    if (documents.size() == 1) node_starts.push_back(mark.pos);
    if (documents.empty() || !documents.back().root.is_null()) return false;
    documents.back().root = mark;
    return true;
  }
  void add(const size& s) {
    if (open_.empty()) return;
    open_.back().expanded.nodes = saturated(open_.back().expanded.nodes + s.nodes);
    open_.back().expanded.bytes = saturated(open_.back().expanded.bytes + s.bytes);
  }
  void anchored(YAML::anchor_t anchor, const size& s, bool still_open) {
    if (anchor == YAML::NullAnchor) return;
    if (anchors_.size() <= anchor) anchors_.resize(anchor + 1);
    anchors_[anchor] = {s, still_open};
  }
  void leaf(YAML::anchor_t anchor, std::size_t bytes) {
    const size s{1, bytes};
    anchored(anchor, s, false);
    add(s);
  }
  void open(YAML::anchor_t anchor) {
    anchored(anchor, {}, true);
    open_.push_back({anchor, {1, 0}});
  }
  void close() {
    if (open_.empty()) return;
    const collection done = open_.back();
    open_.pop_back();
    anchored(done.anchor, done.expanded, false);
    add(done.expanded);
  }

  std::vector<anchor_state> anchors_;  // by anchor number (yaml-cpp counts them from 1)
  std::vector<collection> open_;       // the collections being read, outermost first
  size aliased_;                       // what the aliases repeated so far
};

// The documents are counted from the parser's events before the first is loaded, not
// with YAML::LoadAll: on some invalid input (a stray ',' outside any [] or {}) the parser
// of yaml-cpp 0.7 returns empty documents forever without reading on, and LoadAll fills
// memory with them (jbeder/yaml-cpp#1040). Here, a document that starts where the one
// before it started is that input's error. Three documents are enough to tell. False after
// reporting such an error, or aliases that repeat too much.
bool scan_documents(const std::string& text, checker& c, document_marks& marks) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  while (marks.documents.size() < 3 && parser.HandleNextDocument(marks)) {
    const auto& d = marks.documents;
    if (d.size() >= 2 && d[d.size() - 1].start.pos == d[d.size() - 2].start.pos &&
        d[d.size() - 1].root.pos == d[d.size() - 2].root.pos) {
      const YAML::Mark at = d.back().root.is_null() ? d.back().start : d.back().root;
      c.error(at, c.positions().byte_at(at) == ',' ? "invalid YAML: unexpected ','"
                                                   : "invalid YAML: unexpected token");
      return false;
    }
  }
  if (marks.too_many_aliased) {
    c.error(*marks.too_many_aliased,
            marks.aliased_cycle
                ? "this alias is inside the node its anchor names: it would repeat it forever"
                : fmt::format("with this alias, the aliases of the file repeat more than {} "
                              "nodes or {} MiB of values of their anchors: no configuration "
                              "is that large (is an alias repeated by mistake?)",
                              grouped(kMaxAliasedNodes), kMaxAliasedBytes >> 20));
    return false;
  }
  return true;
}

}  // namespace

std::optional<YAML::Node> read_document(std::string_view yaml, checker& c) {
  const std::string text(yaml);
  document_marks marks;
  YAML::Node root;
  try {
    if (!scan_documents(text, c, marks)) return std::nullopt;
    c.positions().set_node_starts(std::move(marks.node_starts));
    root = YAML::Load(text);  // the first document
  } catch (const YAML::DeepRecursion& e) {
    c.error(e.mark, "invalid YAML: nested too deeply");
    return std::nullopt;
  } catch (const YAML::Exception& e) {
    // yaml-cpp's message for a tab in an indentation ("illegal map value", "end of map
    // not found"…) does not say so: the first such line is named.
    const auto tab = c.positions().first_tab_indented_line();
    c.error(e.mark,
            fmt::format("invalid YAML: {}{}", e.msg,
                        tab ? fmt::format(" (line {} is indented with a tab: YAML indents with "
                                          "spaces only)",
                                          *tab)
                            : std::string()));
    return std::nullopt;
  }
  const std::size_t documents = marks.documents.size();
  // Several documents: that is the error, even when the first is empty (say, a file that
  // starts with "---" twice).
  // At its root, or where it starts (its "---") when it is empty: the mark of a null
  // with nothing written is the next token's, maybe past the end of the file.
  if (documents > 1) {
    const auto& second = marks.documents[1];
    c.error(second.root.is_null() || second.empty ? second.start : second.root,
            "only one YAML document is allowed (remove the \"---\")");
  }
  if (documents == 0 || root.IsNull()) {
    if (documents <= 1) {
      c.error(YAML::Mark(), "the configuration is empty: it needs at least kafka and pipelines");
    }
    return std::nullopt;
  }
  return root;
}

}  // namespace sketchd::config_detail
