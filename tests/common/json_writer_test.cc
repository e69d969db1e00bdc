#include "src/common/json_writer.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace dcm {
namespace {

std::string Escaped(std::string_view in) {
  std::string out;
  AppendJsonEscaped(out, in);
  return out;
}

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

TEST(JsonEscapeTest, EscapesQuotesAndBackslashes) {
  EXPECT_EQ(Escaped(R"(say "hi" \ bye)"), R"(say \"hi\" \\ bye)");
}

TEST(JsonEscapeTest, EscapesNamedControlCharacters) {
  EXPECT_EQ(Escaped("a\nb\rc\td\be\ff"), R"(a\nb\rc\td\be\ff)");
}

TEST(JsonEscapeTest, EscapesOtherControlCharactersAsU00XX) {
  EXPECT_EQ(Escaped(std::string("\x00\x01\x1f\x7f", 4)), R"(\u0000\u0001\u001f\u007f)");
}

TEST(JsonEscapeTest, KeepsPrintableAsciiVerbatim) {
  const std::string ascii = "Hello, world! {}[]:/<>&'";
  EXPECT_EQ(Escaped(ascii), ascii);
}

TEST(JsonEscapeTest, FindsEveryByteThatNeedsEscapingAtEveryPositionOfALongString) {
  // Long strings are scanned eight bytes at a time: each byte value, at each position of two
  // words and a tail, escapes exactly as it does alone.
  for (int b = 0; b < 256; ++b) {
    const std::string alone = Escaped(std::string(1, static_cast<char>(b)));
    for (size_t at = 0; at < 19; ++at) {
      std::string in(19, 'a');
      in[at] = static_cast<char>(b);
      EXPECT_EQ(Escaped(in), std::string(at, 'a') + alone + std::string(18 - at, 'a'))
          << "byte " << b << " at " << at;
    }
  }
}

TEST(JsonEscapeTest, KeepsValidMultiByteSequences) {
  EXPECT_EQ(Escaped("caf\xC3\xA9"), "caf\xC3\xA9");            // 2 bytes: é
  EXPECT_EQ(Escaped("\xE2\x82\xAC"), "\xE2\x82\xAC");          // 3 bytes: €
  EXPECT_EQ(Escaped("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");  // 4 bytes: 😀
  EXPECT_EQ(Escaped("\xF4\x8F\xBF\xBF"), "\xF4\x8F\xBF\xBF");  // U+10FFFF
  EXPECT_EQ(Escaped("\xEF\xBF\xBD"), "\xEF\xBF\xBD");          // U+FFFD itself
}

TEST(JsonEscapeTest, ReplacesLoneContinuationAndInvalidBytes) {
  EXPECT_EQ(Escaped("a\x80z"), std::string("a") + kReplacement + "z");
  EXPECT_EQ(Escaped("\xFF"), kReplacement);
  EXPECT_EQ(Escaped("\xF5\x80\x80\x80"),
            std::string(kReplacement) + kReplacement + kReplacement + kReplacement);
}

TEST(JsonEscapeTest, ReplacesTruncatedSequences) {
  EXPECT_EQ(Escaped("\xC3"), kReplacement);
  EXPECT_EQ(Escaped("x\xE2\x82"), std::string("x") + kReplacement + kReplacement);
  EXPECT_EQ(Escaped("\xF0\x9F\x98"), std::string(kReplacement) + kReplacement + kReplacement);
}

TEST(JsonEscapeTest, RejectsOverlongEncodings) {
  EXPECT_EQ(Escaped("\xC0\xAF"), std::string(kReplacement) + kReplacement);  // overlong '/'
  EXPECT_EQ(Escaped("\xC1\xBF"), std::string(kReplacement) + kReplacement);
  // 3-byte overlong of U+002F and 4-byte overlong of U+FFFF.
  EXPECT_EQ(Escaped("\xE0\x80\xAF").find("\xE0"), std::string::npos);
  EXPECT_EQ(Escaped("\xF0\x8F\xBF\xBF").find("\xF0"), std::string::npos);
  EXPECT_EQ(Escaped("\xE0\x80\xAF").substr(0, 3), kReplacement);
}

TEST(JsonEscapeTest, RejectsSurrogatesAndCodePointsAboveMax) {
  EXPECT_EQ(Escaped("\xED\xA0\x80").substr(0, 3), kReplacement);  // U+D800
  EXPECT_EQ(Escaped("\xED\xBF\xBF").find("\xED"), std::string::npos);
  EXPECT_EQ(Escaped("\xF4\x90\x80\x80").find("\xF4"), std::string::npos);  // U+110000
  EXPECT_EQ(Escaped("\xED\x9F\xBF"), "\xED\x9F\xBF");                      // U+D7FF is fine
}

TEST(JsonEscapeTest, ReplacementThenResyncsOnNextValidCharacter) {
  // A bad lead byte followed by ASCII: only the bad byte is replaced.
  EXPECT_EQ(Escaped("\xE2(a"), std::string(kReplacement) + "(a");
}

TEST(JsonWriterTest, WritesScalars) {
  JsonWriter w;
  w.BeginArray();
  w.Int(-42);
  w.Uint(18446744073709551615ULL);
  w.Double(1.5);
  w.Bool(true);
  w.Bool(false);
  w.Null();
  w.String("s");
  w.EndArray();
  EXPECT_EQ(w.str(), R"([-42,18446744073709551615,1.5,true,false,null,"s"])");
}

TEST(JsonWriterTest, WritesNonFiniteDoublesAsNull) {
  JsonWriter w;
  w.BeginArray();
  w.Double(std::numeric_limits<double>::infinity());
  w.Double(std::numeric_limits<double>::quiet_NaN());
  w.EndArray();
  EXPECT_EQ(w.Take(), "[null,null]");
}

TEST(JsonWriterTest, PlacesCommasInNestedContainers) {
  JsonWriter w;
  w.BeginObject();
  w.Field("a", 1);
  w.Key("b");
  w.BeginArray();
  w.BeginObject();
  w.EndObject();
  w.BeginArray();
  w.EndArray();
  w.Int(2);
  w.BeginObject();
  w.Field("x", "y");
  w.Field("z", false);
  w.EndObject();
  w.EndArray();
  w.Key("c");
  w.BeginObject();
  w.Key("d");
  w.BeginObject();
  w.EndObject();
  w.EndObject();
  w.Field("e", "f");
  w.EndObject();
  EXPECT_EQ(w.Take(), R"({"a":1,"b":[{},[],2,{"x":"y","z":false}],"c":{"d":{}},"e":"f"})");
}

TEST(JsonWriterTest, EmptyContainers) {
  JsonWriter w;
  w.BeginObject();
  w.EndObject();
  EXPECT_EQ(w.str(), "{}");
  JsonWriter a;
  a.BeginArray();
  a.EndArray();
  EXPECT_EQ(a.str(), "[]");
}

TEST(JsonWriterTest, EscapesKeysAndValues) {
  JsonWriter w;
  w.BeginObject();
  w.Field("k\"ey", "v\nal\xFF");
  w.EndObject();
  EXPECT_EQ(w.Take(), "{\"k\\\"ey\":\"v\\nal\xEF\xBF\xBD\"}");
}

TEST(JsonWriterTest, RawIsSeparatedLikeAnyValue) {
  JsonWriter w;
  w.BeginObject();
  w.Key("a");
  w.Raw(R"({"x":[1,2]})");
  w.Key("b");
  w.Raw("3");
  w.EndObject();
  EXPECT_EQ(w.str(), R"({"a":{"x":[1,2]},"b":3})");
  JsonWriter arr;
  arr.BeginArray();
  arr.Raw("1");
  arr.Raw("{}");
  arr.EndArray();
  EXPECT_EQ(arr.str(), "[1,{}]");
}

TEST(JsonWriterTest, FieldOverloadsPickTheRightType) {
  JsonWriter w;
  w.BeginObject();
  w.Field("s", std::string_view("x"));
  w.Field("c", "lit");
  w.Field("i", 7);
  w.Field("l", int64_t{-9000000000});
  w.Field("b", true);
  w.EndObject();
  EXPECT_EQ(w.Take(), R"({"s":"x","c":"lit","i":7,"l":-9000000000,"b":true})");
}

}  // namespace
}  // namespace dcm
