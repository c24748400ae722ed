// The waiting page template's placeholders, filled as if a room name could hold anything.
#include "server/page_template.h"

#include <gtest/gtest.h>

#include <string>

namespace anteroom::server {
namespace {

TEST(PageTemplateTest, FillsBothPlaceholdersEverywhere) {
  EXPECT_EQ(
      RenderPageTemplate("<h1>{{room}}</h1><script>r={{room_json}};q={{room}}</script>", "a.b:c-d"),
      "<h1>a.b:c-d</h1><script>r=\"a.b:c-d\";q=a.b:c-d</script>");
}

TEST(PageTemplateTest, KeepsEverythingElseAsWritten) {
  EXPECT_EQ(RenderPageTemplate("", "x"), "");
  EXPECT_EQ(RenderPageTemplate("no placeholders", "x"), "no placeholders");
  EXPECT_EQ(RenderPageTemplate("{{other}} {{ room }} {{room {{", "x"),
            "{{other}} {{ room }} {{room {{");
  EXPECT_EQ(RenderPageTemplate("{{{room}}}", "x"), "{x}");
  EXPECT_EQ(RenderPageTemplate("{{room}}{{room_json}}", "x"), "x\"x\"");
  std::string binary("a\0b{{room}}\xff", 12);
  EXPECT_EQ(RenderPageTemplate(binary, "x"), std::string("a\0bx\xff", 5));
}

TEST(PageTemplateTest, SubstitutedTextIsNotScannedAgain) {
  EXPECT_EQ(RenderPageTemplate("{{room}}", "{{room_json}}"), "{{room_json}}");
  EXPECT_EQ(RenderPageTemplate("{{room_json}}", "{{room}}"), "\"{{room}}\"");
}

TEST(PageTemplateTest, HtmlEscapesMarkup) {
  EXPECT_EQ(HtmlEscape("<a href=\"x\" title='y'>&amp;</a>"),
            "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;amp;&lt;/a&gt;");
  EXPECT_EQ(RenderPageTemplate("<p>{{room}}</p>", "<script>"), "<p>&lt;script&gt;</p>");
}

TEST(PageTemplateTest, JsonCannotCloseTheScript) {
  EXPECT_EQ(ScriptJsonString("</script><!--&"), "\"\\u003c/script\\u003e\\u003c!--\\u0026\"");
  EXPECT_EQ(ScriptJsonString("quote\" back\\slash\nline"), "\"quote\\\" back\\\\slash\\nline\"");
  std::string page = RenderPageTemplate("<script>r={{room_json}}</script>", "</script>x");
  EXPECT_EQ(page.find("</script>"), page.size() - 9) << page;
}

}  // namespace
}  // namespace anteroom::server
