#include "sketchd/kafka/properties.h"

#include <array>

#include "sketchd/kafka/client.h"

namespace sketchd::kafka {

property_check check_property(const std::string& name, const std::string& value) {
  const conf_ptr scratch(rd_kafka_conf_new());
  std::array<char, 512> errstr{};
  switch (
      rd_kafka_conf_set(scratch.get(), name.c_str(), value.c_str(), errstr.data(), errstr.size())) {
    case RD_KAFKA_CONF_OK:
      break;
    case RD_KAFKA_CONF_UNKNOWN:
      return {property_check::outcome::unknown, {}, {}};
    case RD_KAFKA_CONF_INVALID:
    default:
      return {property_check::outcome::invalid, errstr.data(), {}};
  }
  std::array<char, 64> setting{};
  std::size_t size = setting.size();
  property_check check;
  if (rd_kafka_conf_get(scratch.get(), name.c_str(), setting.data(), &size) == RD_KAFKA_CONF_OK) {
    check.read_back = setting.data();
  }
  return check;
}

std::string_view librdkafka_version() noexcept { return rd_kafka_version_str(); }

}  // namespace sketchd::kafka
